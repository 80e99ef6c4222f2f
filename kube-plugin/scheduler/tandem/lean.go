package tandem

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Rust is sent pods and nodes as JSON holding only the fields it reads: for a pod, those of
// the lean decoder in kube-common (src/lean.rs), which skips every other field anyway; for a
// node, its name, labels and GPU resources. encoding/json walks every field of a v1.Pod or
// v1.Node by reflection, and at start-up the informers hand the plugin every pod and node of
// the cluster before kube-scheduler reports ready: at 5,000 nodes and 10,000 pods, encoding
// them whole was a third of a second of CPU. The shapes below keep the API's field names, so
// Rust decodes them as it decodes the objects themselves.

// leanPod is a pod as Rust is sent it.
type leanPod struct {
	Metadata leanPodMeta   `json:"metadata"`
	Spec     leanPodSpec   `json:"spec"`
	Status   leanPodStatus `json:"status"`
}

type leanPodMeta struct {
	Name              string                  `json:"name,omitempty"`
	GenerateName      string                  `json:"generateName,omitempty"`
	Namespace         string                  `json:"namespace,omitempty"`
	UID               types.UID               `json:"uid,omitempty"`
	ResourceVersion   string                  `json:"resourceVersion,omitempty"`
	Generation        int64                   `json:"generation,omitempty"`
	CreationTimestamp *metav1.Time            `json:"creationTimestamp,omitempty"`
	DeletionTimestamp *metav1.Time            `json:"deletionTimestamp,omitempty"`
	Labels            map[string]string       `json:"labels,omitempty"`
	Annotations       map[string]string       `json:"annotations,omitempty"`
	OwnerReferences   []metav1.OwnerReference `json:"ownerReferences,omitempty"`
}

type leanPodSpec struct {
	NodeName      string          `json:"nodeName,omitempty"`
	SchedulerName string          `json:"schedulerName,omitempty"`
	Priority      *int32          `json:"priority,omitempty"`
	Containers    []leanContainer `json:"containers"`
}

type leanContainer struct {
	Name      string                  `json:"name"`
	Resources v1.ResourceRequirements `json:"resources"`
}

type leanPodStatus struct {
	Phase             v1.PodPhase           `json:"phase,omitempty"`
	StartTime         *metav1.Time          `json:"startTime,omitempty"`
	ContainerStatuses []leanContainerStatus `json:"containerStatuses,omitempty"`
}

type leanContainerStatus struct {
	Name  string            `json:"name"`
	State v1.ContainerState `json:"state"`
}

// leanNode is a node as Rust is sent it.
type leanNode struct {
	Metadata leanNodeMeta   `json:"metadata"`
	Status   leanNodeStatus `json:"status"`
}

type leanNodeMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

type leanNodeStatus struct {
	Capacity    v1.ResourceList `json:"capacity,omitempty"`
	Allocatable v1.ResourceList `json:"allocatable,omitempty"`
}

// timeOrNil is t, or nil when it is unset (the API's encoding of an unset time is null, which
// Rust reads as absent).
func timeOrNil(t metav1.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// leanOfPod is what Rust is sent of pod.
func leanOfPod(pod *v1.Pod) *leanPod {
	lean := &leanPod{
		Metadata: leanPodMeta{
			Name:              pod.Name,
			GenerateName:      pod.GenerateName,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Generation:        pod.Generation,
			CreationTimestamp: timeOrNil(pod.CreationTimestamp),
			DeletionTimestamp: pod.DeletionTimestamp,
			Labels:            pod.Labels,
			Annotations:       pod.Annotations,
			OwnerReferences:   pod.OwnerReferences,
		},
		Spec: leanPodSpec{
			NodeName:      pod.Spec.NodeName,
			SchedulerName: pod.Spec.SchedulerName,
			Priority:      pod.Spec.Priority,
			Containers:    make([]leanContainer, len(pod.Spec.Containers)),
		},
		Status: leanPodStatus{
			Phase:     pod.Status.Phase,
			StartTime: pod.Status.StartTime,
		},
	}
	for i, c := range pod.Spec.Containers {
		lean.Spec.Containers[i] = leanContainer{Name: c.Name, Resources: c.Resources}
	}
	if len(pod.Status.ContainerStatuses) > 0 {
		lean.Status.ContainerStatuses = make([]leanContainerStatus, len(pod.Status.ContainerStatuses))
		for i, c := range pod.Status.ContainerStatuses {
			lean.Status.ContainerStatuses[i] = leanContainerStatus{Name: c.Name, State: c.State}
		}
	}
	return lean
}

// leanOfNode is what Rust is sent of node.
func leanOfNode(node *v1.Node) *leanNode {
	return &leanNode{
		Metadata: leanNodeMeta{Name: node.Name, Labels: node.Labels},
		Status:   leanNodeStatus{Capacity: node.Status.Capacity, Allocatable: node.Status.Allocatable},
	}
}

// lean is an informer's pod or node as Rust is sent it; other objects as they are.
func lean(obj any) any {
	switch o := obj.(type) {
	case *v1.Pod:
		return leanOfPod(o)
	case *v1.Node:
		return leanOfNode(o)
	}
	return obj
}
