package tandem

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fullPod sets every field Rust reads of a pod, and others it does not.
func fullPod() *v1.Pod {
	at := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	later := metav1.NewTime(at.Add(time.Hour))
	priority := int32(5)
	controller := true
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "train-0", GenerateName: "train-", Namespace: "ml", UID: "6f1c",
			ResourceVersion: "812", Generation: 1, CreationTimestamp: at, DeletionTimestamp: &later,
			Labels:          map[string]string{"tandem.dev/job": "resnet"},
			Annotations:     map[string]string{"tandem.dev/gpu": "node-a/1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "aa", Controller: &controller}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: v1.PodSpec{
			NodeName: "node-a", SchedulerName: "tandem", Priority: &priority,
			Volumes:     []v1.Volume{{Name: "data"}},
			Tolerations: []v1.Toleration{{Key: "gpu", Operator: v1.TolerationOpExists}},
			Containers: []v1.Container{{
				Name: "main", Image: "trainer:1", Command: []string{"python"},
				Env: []v1.EnvVar{{Name: "EPOCHS", Value: "3"}},
				Resources: v1.ResourceRequirements{
					Limits: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
				},
			}},
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, StartTime: &at, PodIP: "10.0.0.7",
			ContainerStatuses: []v1.ContainerStatus{{
				Name: "main", Image: "trainer:1", RestartCount: 2,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: at}},
			}},
		},
	}
}

// sameAsWhole checks that what Rust is sent of obj carries each of its fields as the object's
// own encoding does: decoding the whole object into the lean shape and encoding that again
// must give the same JSON (a field the projection forgot to copy would be missing).
func sameAsWhole(t *testing.T, obj any, sent any, shape any) {
	t.Helper()
	whole, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(whole, shape); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(shape)
	got, err := json.Marshal(sent)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("Rust is sent\n%s\nthe object's own fields are\n%s", got, want)
	}
}

func TestRustIsSentAPodsFieldsAsTheAPIEncodesThem(t *testing.T) {
	pod := fullPod()
	sameAsWhole(t, pod, lean(pod), &leanPod{})
	body, _ := json.Marshal(lean(pod))
	var back v1.Pod
	if err := json.Unmarshal(body, &back); err != nil {
		t.Fatal(err)
	}
	if back.ManagedFields != nil || back.Spec.Volumes != nil || back.Spec.Containers[0].Image != "" || back.Status.PodIP != "" {
		t.Errorf("fields Rust does not read were sent: %s", body)
	}
	if !reflect.DeepEqual(back.Spec.Containers[0].Resources, pod.Spec.Containers[0].Resources) ||
		back.Status.ContainerStatuses[0].State.Running == nil || back.OwnerReferences[0].Name != "train" {
		t.Errorf("fields Rust reads were lost: %s", body)
	}
	if pod.ManagedFields == nil {
		t.Error("the informer's pod was modified")
	}
}

func TestAPodWithoutTimesOrStatusesIsSentWithoutThem(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main"}}}}
	sameAsWhole(t, pod, lean(pod), &leanPod{})
}

func TestRustIsSentANodesNameLabelsAndResources(t *testing.T) {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "gpu-node-1", Labels: map[string]string{"nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Status: v1.NodeStatus{
			Capacity:    v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Allocatable: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("7")},
			Images:      []v1.ContainerImage{{Names: []string{"trainer:1"}, SizeBytes: 1 << 30}},
		},
	}
	sameAsWhole(t, node, lean(node), &leanNode{})
	body, _ := json.Marshal(lean(node))
	var back v1.Node
	if err := json.Unmarshal(body, &back); err != nil {
		t.Fatal(err)
	}
	if back.ManagedFields != nil || back.Status.Images != nil {
		t.Errorf("fields Rust does not read were sent: %s", body)
	}
}
