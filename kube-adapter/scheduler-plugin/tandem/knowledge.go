package tandem

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// followEvery is how often the stored knowledge base is checked for a newer version (the
// extender's follower checks as often).
const followEvery = 2 * time.Second

// knowledge keeps the engine and the knowledge-base ConfigMap (the extender's format, which
// Rust reads and writes; Go only moves it) in step.
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

// refresh loads the ConfigMap into the engine; whether the engine's knowledge changed.
func (k *knowledge) refresh(ctx context.Context) (bool, error) {
	maps := k.client.CoreV1().ConfigMaps(k.where.Namespace)
	cm, err := maps.Get(ctx, k.where.KnowledgeConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		k.stored.Store(false)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	k.stored.Store(true)
	body, err := json.Marshal(cm)
	if err != nil {
		return false, err
	}
	return k.engine.restore(body)
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
			}
		}
	}()
}

// save writes what the engine knows (leader only): Rust gives the ConfigMap, with the
// resourceVersion it last read or wrote as the precondition.
func (k *knowledge) save(ctx context.Context) error {
	body, err := k.engine.snapshot()
	if err != nil {
		return err
	}
	var cm v1.ConfigMap
	if err := json.Unmarshal(body, &cm); err != nil {
		return err
	}
	maps := k.client.CoreV1().ConfigMaps(k.where.Namespace)
	var written *v1.ConfigMap
	if cm.ResourceVersion == "" {
		written, err = maps.Create(ctx, &cm, metav1.CreateOptions{})
	} else {
		written, err = maps.Update(ctx, &cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	k.stored.Store(true)
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
