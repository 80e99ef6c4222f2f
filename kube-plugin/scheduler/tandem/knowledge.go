package tandem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// followEvery is how often the stored knowledge base is checked for a newer version (the
// extender's follower checks as often).
const followEvery = 2 * time.Second

// knowledge keeps the engine and the knowledge-base ConfigMaps (the extender's format: a head
// and, for a large knowledge base, the shards it lists; Rust reads and writes them, Go only
// moves them) in step.
//
// Only the scheduler holding kube-scheduler's leader lease schedules, so the first scheduling
// cycle marks this process the leader; until then it never writes. The leader creates the
// ConfigMap when none exists, so a restart (or a standby taking over) resumes from it; every
// replica loads a newer version whenever one appears (another writer such as the extender's
// profile intake, or `tandem kb`).
type knowledge struct {
	client  kubernetes.Interface
	engine  *engine
	where   settings
	leading atomic.Bool
	// stored is whether the ConfigMap exists (as far as this replica knows).
	stored atomic.Bool
}

func newKnowledge(client kubernetes.Interface, e *engine, where settings) *knowledge {
	return &knowledge{client: client, engine: e, where: where}
}

// load reads the stored knowledge base into the engine, if there is one. A knowledge base
// that cannot be read fails start-up, as it does the extender's.
func (k *knowledge) load(ctx context.Context) error {
	changed, err := k.refresh(ctx)
	if err != nil {
		return fmt.Errorf("cannot read the Tandem knowledge base ConfigMap %s/%s: %w",
			k.where.Namespace, k.where.KnowledgeConfigMap, err)
	}
	if changed {
		klog.FromContext(ctx).Info("Tandem resumed from the stored knowledge base",
			"configMap", klog.KRef(k.where.Namespace, k.where.KnowledgeConfigMap))
	}
	return nil
}

// readAttempts is how many times refresh starts over from the head when a shard it lists is
// gone (a writer replaced the head and collected it in between).
const readAttempts = 3

// refresh loads the knowledge base into the engine; whether the engine's knowledge changed.
// A large knowledge base is held in shard ConfigMaps the head lists: Rust names the ones it
// needs, and they are fetched and handed over with the head.
func (k *knowledge) refresh(ctx context.Context) (bool, error) {
	maps := k.client.CoreV1().ConfigMaps(k.where.Namespace)
	for attempt := 1; ; attempt++ {
		cm, err := maps.Get(ctx, k.where.KnowledgeConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			k.stored.Store(false)
			return false, nil
		}
		if err != nil {
			return false, err
		}
		k.stored.Store(true)
		input := struct {
			Head   *v1.ConfigMap  `json:"head"`
			Shards []v1.ConfigMap `json:"shards,omitempty"`
		}{Head: cm}
		gone := false
		for !gone {
			body, err := json.Marshal(input)
			if err != nil {
				return false, err
			}
			answer, err := k.engine.restore(body)
			if err != nil {
				return false, err
			}
			if answer.Shards == nil {
				return answer.Changed, nil
			}
			for _, name := range answer.Shards {
				shard, err := maps.Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					gone = true
					break
				}
				if err != nil {
					return false, err
				}
				input.Shards = append(input.Shards, *shard)
			}
		}
		if attempt == readAttempts {
			return false, fmt.Errorf("a shard of the knowledge base is missing after %d reads of its head", readAttempts)
		}
	}
}

// lead marks this replica the leader (it schedules); the first time, it stores the
// knowledge base if none is stored yet.
func (k *knowledge) lead() {
	if k.leading.Swap(true) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if !k.stored.Load() {
			if err := k.save(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "Tandem could not store its knowledge base")
				if err := k.engine.storeFailed(); err != nil {
					klog.FromContext(ctx).Error(err, "Tandem could not count the failed write")
				}
			}
		}
	}()
}

// save writes what the engine knows (leader only). Rust gives the ConfigMaps: the shards to
// create, then the head (with the resourceVersion it last read or wrote as the precondition),
// then the shards the head no longer lists, to delete. A refused head takes the shards created
// for it along.
func (k *knowledge) save(ctx context.Context) error {
	body, err := k.engine.snapshot()
	if err != nil {
		return err
	}
	var plan struct {
		Shards  []v1.ConfigMap `json:"shards"`
		Head    v1.ConfigMap   `json:"head"`
		Collect []struct {
			Name string    `json:"name"`
			UID  types.UID `json:"uid"`
		} `json:"collect"`
	}
	if err := json.Unmarshal(body, &plan); err != nil {
		return err
	}
	maps := k.client.CoreV1().ConfigMaps(k.where.Namespace)
	var created []*v1.ConfigMap
	undo := func() {
		for _, shard := range created {
			uid := shard.UID
			_ = maps.Delete(ctx, shard.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		}
	}
	for i := range plan.Shards {
		shard, err := maps.Create(ctx, &plan.Shards[i], metav1.CreateOptions{})
		if err != nil {
			// AlreadyExists: a shard the head does not list (another writer's, or one left
			// behind); this write does not reuse it, and the next one tries again.
			undo()
			return fmt.Errorf("cannot create knowledge-base shard %s: %w", plan.Shards[i].Name, err)
		}
		created = append(created, shard)
	}
	var written *v1.ConfigMap
	if plan.Head.ResourceVersion == "" {
		written, err = maps.Create(ctx, &plan.Head, metav1.CreateOptions{})
	} else {
		written, err = maps.Update(ctx, &plan.Head, metav1.UpdateOptions{})
	}
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			undo()
		}
		return err
	}
	k.stored.Store(true)
	for _, shard := range plan.Collect {
		uid := shard.UID
		err := maps.Delete(ctx, shard.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			klog.FromContext(ctx).Error(err, "Tandem could not collect a knowledge-base shard", "configMap", shard.Name)
		}
	}
	return k.engine.text(stored, written.ResourceVersion)
}

// follow loads newer versions of the knowledge base until ctx ends.
func (k *knowledge) follow(ctx context.Context) {
	logger := klog.FromContext(ctx)
	ticker := time.NewTicker(followEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			changed, err := k.refresh(ctx)
			if err != nil {
				logger.Error(err, "Tandem could not follow the knowledge base")
			} else if changed {
				logger.Info("Tandem loaded a newer knowledge base")
			}
		}
	}
}
