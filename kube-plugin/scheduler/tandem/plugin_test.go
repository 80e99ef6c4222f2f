package tandem

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func TestArgsReachRustAsJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		want string
	}{
		{"none", nil, ""},
		{"JSON", &runtime.Unknown{Raw: []byte(`{"candidateNodes":5}`), ContentType: runtime.ContentTypeJSON}, `{"candidateNodes":5}`},
		{"YAML", &runtime.Unknown{Raw: []byte("candidateNodes: 5\nnamespace: gpu\n"), ContentType: runtime.ContentTypeYAML}, `{"candidateNodes":5,"namespace":"gpu"}`},
	} {
		got, err := argsJSON(tc.obj)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := argsJSON(&v1.Pod{}); err == nil {
		t.Error("args of another type were accepted")
	}
}

func TestOnlyPodsThatConstrainTheirNodeAreOfferedEveryNode(t *testing.T) {
	plain := v1.PodSpec{Containers: []v1.Container{{Name: "train", Ports: []v1.ContainerPort{{ContainerPort: 8080}}}}}
	if constrained(&v1.Pod{Spec: plain}) {
		t.Error("a pod asking for resources only is constrained")
	}
	for name, change := range map[string]func(*v1.PodSpec){
		"node selector": func(s *v1.PodSpec) { s.NodeSelector = map[string]string{"zone": "a"} },
		"affinity":      func(s *v1.PodSpec) { s.Affinity = &v1.Affinity{} },
		"claim volume": func(s *v1.PodSpec) {
			s.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		},
		"host port in an init container": func(s *v1.PodSpec) {
			s.InitContainers = []v1.Container{{Name: "init", Ports: []v1.ContainerPort{{ContainerPort: 80, HostPort: 80}}}}
		},
	} {
		spec := *plain.DeepCopy()
		change(&spec)
		if !constrained(&v1.Pod{Spec: spec}) {
			t.Errorf("a pod with a %s is not constrained", name)
		}
	}
}

func TestCandidatesLeaveOutCordonedAndUntoleratedTaintedNodes(t *testing.T) {
	gpuTaint := v1.Taint{Key: "nvidia.com/gpu", Effect: v1.TaintEffectNoSchedule}
	tolerating := &v1.Pod{Spec: v1.PodSpec{Tolerations: []v1.Toleration{{Key: "nvidia.com/gpu", Operator: v1.TolerationOpExists}}}}
	plain := &v1.Pod{}
	nodes := map[string]*v1.Node{
		"open":      {},
		"cordoned":  {Spec: v1.NodeSpec{Unschedulable: true}},
		"gpu-taint": {Spec: v1.NodeSpec{Taints: []v1.Taint{gpuTaint}}},
		"preferred": {Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "x", Effect: v1.TaintEffectPreferNoSchedule}}}},
	}
	for _, tc := range []struct {
		pod  *v1.Pod
		node string
		want bool
	}{
		{plain, "open", true},
		{plain, "cordoned", false},
		{plain, "gpu-taint", false},
		{plain, "preferred", true},
		{tolerating, "gpu-taint", true},
		{tolerating, "cordoned", false},
	} {
		if got := admits(tc.pod, nodes[tc.node]); got != tc.want {
			t.Errorf("pod with %d tolerations on %s: admitted %v, want %v", len(tc.pod.Spec.Tolerations), tc.node, got, tc.want)
		}
	}
	if admits(plain, nil) {
		t.Error("a node the snapshot lacks was admitted")
	}
}

func TestWidenedPodsAreRememberedUpToTheBound(t *testing.T) {
	var w widenedPods
	if w.has("a") {
		t.Fatal("an empty set holds a pod")
	}
	w.add("a")
	if !w.has("a") || w.has("b") {
		t.Fatal("the set does not hold exactly the pod added")
	}
	for i := 1; i < maxWidened; i++ {
		w.add(types.UID(fmt.Sprint(i)))
	}
	if !w.has("a") {
		t.Fatal("a pod was forgotten before the bound")
	}
	w.add("past the bound")
	if w.has("a") || !w.has("past the bound") {
		t.Error("past the bound the set did not start again from the new pod")
	}
}
