// Package tandem is the Tandem kube-scheduler framework plugin: the Go side of Kubernetes
// I/O around the Rust engine (kube-plugin/capi), which makes every decision.
//
// PreFilter asks Rust once per pod for the verdict on every node (OOM guard, sharing cap,
// reasons, scores), four bytes per node in a table Rust sends again only when nodes come or
// go, and offers the framework only the few nodes Tandem ranks first (candidateNodes), so
// that its Filter and Score plugins run on those rather than on a sample of the cluster;
// Filter and Score read the verdict in place from the cycle state, so no call crosses
// into Rust per node and nothing is decoded per node. Reserve has Rust choose the GPU and record it at once;
// Unreserve undoes that; Bind binds the pod with the choice as the Binding's annotation (the
// annotation the HTTP extender writes), one API write as the default binder's. Node and pod
// events from the framework's informers feed Rust's view.
package tandem

import (
	"context"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/helper"
	"sigs.k8s.io/yaml"
)

// Name is the plugin's name in KubeSchedulerConfiguration profiles.
const Name = "Tandem"

// stateKey is where PreFilter leaves its verdict for the rest of the cycle.
const stateKey fwk.StateKey = Name + "/verdict"

// Plugin is the Tandem framework plugin.
type Plugin struct {
	handle   fwk.Handle
	engine   *engine
	settings settings
	// widened are the pods offered every node from now on: they found none among the
	// candidates PreFilter narrowed them to.
	widened widenedPods
}

var (
	_ fwk.PreFilterPlugin   = (*Plugin)(nil)
	_ fwk.FilterPlugin      = (*Plugin)(nil)
	_ fwk.PostFilterPlugin  = (*Plugin)(nil)
	_ fwk.PreScorePlugin    = (*Plugin)(nil)
	_ fwk.ScorePlugin       = (*Plugin)(nil)
	_ fwk.ScoreExtensions   = (*Plugin)(nil)
	_ fwk.ReservePlugin     = (*Plugin)(nil)
	_ fwk.BindPlugin        = (*Plugin)(nil)
	_ fwk.EnqueueExtensions = (*Plugin)(nil)
)

// argsJSON is the plugin's args as JSON, whichever way the scheduler decoded them.
func argsJSON(obj runtime.Object) ([]byte, error) {
	if obj == nil {
		return nil, nil
	}
	unknown, ok := obj.(*runtime.Unknown)
	if !ok {
		return nil, fmt.Errorf("want the Tandem args as runtime.Unknown, got %T", obj)
	}
	if unknown.ContentType == runtime.ContentTypeYAML {
		return yaml.YAMLToJSON(unknown.Raw)
	}
	return unknown.Raw, nil
}

// New starts the plugin: Rust validates the args (an error names the field) and starts its
// core with the scheduler's connection (the stored knowledge base is loaded, the intake
// listens if asked), and the informers start feeding the view.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := argsJSON(obj)
	if err != nil {
		return nil, err
	}
	conn, err := connectionOf(h.KubeConfig())
	if err != nil {
		return nil, err
	}
	eng, s, err := newEngine(args, conn)
	if err != nil {
		return nil, err
	}
	p := &Plugin{handle: h, engine: eng, settings: s}
	p.watch(ctx)
	return p, nil
}

// Name is the plugin's name.
func (p *Plugin) Name() string { return Name }

// watch feeds node and pod events from the framework's shared informers to the Rust view.
func (p *Plugin) watch(ctx context.Context) {
	logger := klog.FromContext(ctx)
	informers := p.handle.SharedInformerFactory()
	report := func(what string, err error) {
		if err != nil {
			logger.Error(err, "Tandem could not follow a cluster event", "event", what)
		}
	}
	_, err := informers.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { report("node added", p.engine.object(setNode, lean(obj))) },
		UpdateFunc: func(_, obj any) { report("node updated", p.engine.object(setNode, lean(obj))) },
		DeleteFunc: func(obj any) {
			if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = gone.Obj
			}
			if node, ok := obj.(*v1.Node); ok {
				report("node deleted", p.engine.text(deleteNode, node.Name))
			}
		},
	})
	report("node handler", err)
	_, err = informers.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { report("pod added", p.engine.object(setPod, lean(obj))) },
		UpdateFunc: func(_, obj any) { report("pod updated", p.engine.object(setPod, lean(obj))) },
		DeleteFunc: func(obj any) {
			if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = gone.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				report("pod deleted", p.engine.text(deletePod, string(pod.UID)))
			}
		},
	})
	report("pod handler", err)
}

// PreFilter asks Rust for the pod's verdict on every node. Pods without the managed GPU
// resource are skipped; an engine failure is an error status for this pod only.
func (p *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	verdict, err := p.engine.prefilter(pod)
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("Tandem: %w", err))
	}
	if !verdict.managed {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	c := &cycle{verdict: verdict}
	state.Write(stateKey, c)
	if names := p.candidates(pod, verdict); names != nil {
		c.narrowed = true
		return &fwk.PreFilterResult{NodeNames: names}, nil
	}
	return nil, nil
}

// candidates are the nodes PreFilter offers the framework: the candidateNodes nodes Tandem
// ranks first among those where the pod fits, cordoned nodes and nodes with a taint the pod
// does not tolerate left out. The framework's Filter plugins still judge each (CPU, memory,
// ports); on a cluster of thousands of nodes they and the Score plugins then run on a few
// nodes instead of the sample the scheduler would take (10% at 5,000 nodes), in which
// Tandem's best node would most often not be. nil, every node, when narrowing is off, when
// the pod constrains its node in ways only the framework judges (selectors, affinity, spread,
// volumes, claims, host ports), when it found no node among its candidates before, or when
// no node qualifies (Filter then reports each node's reason).
func (p *Plugin) candidates(pod *v1.Pod, verdict *prepared) sets.Set[string] {
	limit := p.settings.CandidateNodes
	if limit <= 0 || constrained(pod) || p.widened.has(pod.UID) {
		return nil
	}
	infos := p.handle.SnapshotSharedLister().NodeInfos()
	names := sets.New[string]()
	verdict.ranked(func(name string) bool {
		if info, err := infos.Get(name); err == nil && admits(pod, info.Node()) {
			names.Insert(name)
		}
		return names.Len() < limit
	})
	if names.Len() == 0 {
		return nil
	}
	return names
}

// constrained tells whether pod limits its node beyond resources and taints: then the
// framework's plugins, not Tandem's ranking, must see every node.
func constrained(pod *v1.Pod) bool {
	spec := &pod.Spec
	if len(spec.NodeSelector) > 0 || spec.Affinity != nil || len(spec.TopologySpreadConstraints) > 0 ||
		len(spec.ResourceClaims) > 0 {
		return true
	}
	for _, volume := range spec.Volumes {
		if volume.PersistentVolumeClaim != nil || volume.Ephemeral != nil {
			return true
		}
	}
	for _, containers := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for _, container := range containers {
			for _, port := range container.Ports {
				if port.HostPort != 0 {
					return true
				}
			}
		}
	}
	return false
}

// admits tells whether node may take pod as far as cordons and taints go (the framework's
// NodeUnschedulable and TaintToleration filters, which would otherwise turn away every
// candidate of a tainted group of nodes).
func admits(pod *v1.Pod, node *v1.Node) bool {
	if node == nil {
		return false
	}
	if node.Spec.Unschedulable {
		return tolerates(pod, &v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
	}
	for i := range node.Spec.Taints {
		taint := &node.Spec.Taints[i]
		if taint.Effect != v1.TaintEffectPreferNoSchedule && !tolerates(pod, taint) {
			return false
		}
	}
	return true
}

func tolerates(pod *v1.Pod, taint *v1.Taint) bool {
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}

// PostFilter: a pod that found no node among the candidates PreFilter narrowed it to (its
// best-ranked nodes failed filters Tandem does not judge: CPU or memory, another pod's
// anti-affinity) is offered every node when it is tried again. It returns Unschedulable, so
// the next PostFilter plugin (preemption) still runs.
func (p *Plugin) PostFilter(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if c, ok := read(state); ok && c.narrowed {
		p.widened.add(pod.UID)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// widenedPods is a set of pod UIDs, bounded: past maxWidened it starts again (a pod forgotten
// is narrowed once more, and widened again if it fails again).
type widenedPods struct {
	mu   sync.Mutex
	uids map[types.UID]struct{}
}

const maxWidened = 10_000

func (w *widenedPods) add(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.uids == nil || len(w.uids) >= maxWidened {
		w.uids = make(map[types.UID]struct{})
	}
	w.uids[uid] = struct{}{}
}

func (w *widenedPods) has(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.uids[uid]
	return ok
}

// cycle is the cycle state of one pod: PreFilter's verdict, then Reserve's choice.
type cycle struct {
	verdict *prepared
	// narrowed is set when PreFilter offered only the best-ranked nodes.
	narrowed bool
	reserved *reserved
}

// Clone shares the verdict: nothing changes it after PreFilter.
func (v *cycle) Clone() fwk.StateData {
	copied := *v
	return &copied
}

func read(state fwk.CycleState) (*cycle, bool) {
	data, err := state.Read(stateKey)
	if err != nil {
		return nil, false
	}
	v, ok := data.(*cycle)
	return v, ok
}

// PreFilterExtensions: the verdict does not depend on other pods being added or removed
// during preemption's what-ifs.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter reads the node's verdict.
func (p *Plugin) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	v, ok := read(state)
	if !ok {
		return nil
	}
	kind, _, why, known := v.verdict.verdict(ni.Node().Name)
	switch {
	case !known:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			"Tandem: has not seen this node yet (it follows node events; retry shortly)")
	case kind == verdictUnresolvable:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	case kind == verdictFails:
		return fwk.NewStatus(fwk.Unschedulable, why)
	}
	return nil
}

// PreScore skips scoring for pods Tandem does not manage.
func (p *Plugin) PreScore(_ context.Context, state fwk.CycleState, _ *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	if _, ok := read(state); !ok {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score is the engine's score of the node, 0..100.
func (p *Plugin) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	v, ok := read(state)
	if !ok {
		return 0, nil
	}
	_, score, _, _ := v.verdict.verdict(ni.Node().Name)
	return score, nil
}

// ScoreExtensions gives NormalizeScore.
func (p *Plugin) ScoreExtensions() fwk.ScoreExtensions { return p }

// NormalizeScore scales the scores so the best node gets the maximum, as the extender does:
// the engine's ranking then weighs as much as the other plugins' whatever its absolute level.
func (p *Plugin) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	return helper.DefaultNormalizeScore(fwk.MaxNodeScore, false, scores)
}

// Reserve has Rust choose the pod's GPUs on the node and record them at once.
func (p *Plugin) Reserve(_ context.Context, state fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	v, ok := read(state)
	if !ok {
		return nil
	}
	r, err := p.engine.reserve(string(pod.UID), node)
	if errors.Is(err, errRefused) {
		return fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("Tandem: %w", err))
	}
	v.reserved = r
	return nil
}

// Unreserve gives the GPUs back.
func (p *Plugin) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	if err := p.engine.text(unreserve, string(pod.UID)); err != nil {
		klog.FromContext(ctx).Error(err, "Tandem could not undo a reservation", "pod", klog.KObj(pod))
	}
}

// Bind binds a pod Tandem placed, with the chosen GPUs as the Binding's annotation: the API
// server copies a Binding's annotations onto the pod, so the choice and the binding are one
// write (a PreBind patch would double the API writes per pod, and the watch events they
// cause). Pods Tandem did not place are skipped for the next bind plugin (DefaultBinder).
// The profile must list Tandem under `bind` so it runs before DefaultBinder (see
// deploy/helm/tandem/templates/plugin.yaml).
func (p *Plugin) Bind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	v, ok := read(state)
	if !ok || v.reserved == nil {
		return fwk.NewStatus(fwk.Skip)
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   pod.Namespace,
			Name:        pod.Name,
			UID:         pod.UID,
			Annotations: v.reserved.Annotations,
		},
		Target: v1.ObjectReference{Kind: "Node", Name: node},
	}
	err := p.handle.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("Tandem could not bind the pod with its GPU: %w", err))
	}
	return nil
}

// EventsToRegister: a pod Tandem turned away may fit after a GPU node appears or changes, or
// a pod holding GPUs goes away or changes.
func (p *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel}},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete | fwk.Update}},
	}, nil
}
