package kube

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

func TestQuantitiesKeepTheContractsUnits(t *testing.T) {
	n := Node(&pb.Node{Metadata: &pb.ObjectMeta{Name: "n"}, Status: &pb.NodeStatus{Allocatable: map[string]int64{
		"cpu": 1500, "memory": 2 << 30, "pods": 110, "example.com/gpu": 2, "hugepages-2Mi": 4 << 20,
	}}})
	got := map[string]string{}
	for k, q := range n.Status.Allocatable {
		got[string(k)] = q.String()
	}
	want := map[string]string{"cpu": "1500m", "memory": "2Gi", "pods": "110", "example.com/gpu": "2", "hugepages-2Mi": "4Mi"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("allocatable %v, want %v", got, want)
	}
}

func TestPodAffinityTermsAreMergedAsTheApiserverAdmitsThem(t *testing.T) {
	term := func() *pb.PodAffinityTerm {
		return &pb.PodAffinityTerm{TopologyKey: "zone", LabelSelector: &pb.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MatchLabelKeys: []string{"version", "absent"}, MismatchLabelKeys: []string{"tenant"}}
	}
	p := Pod(&pb.Pod{
		Metadata: &pb.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "web", "version": "v2", "tenant": "a"}},
		Spec: &pb.PodSpec{Affinity: &pb.Affinity{
			PodAffinity:     &pb.PodAffinity{Required: []*pb.PodAffinityTerm{term()}},
			PodAntiAffinity: &pb.PodAffinity{Preferred: []*pb.WeightedPodAffinityTerm{{Weight: 5, Term: term()}}},
		}},
	})
	want := []metav1.LabelSelectorRequirement{
		{Key: "version", Operator: metav1.LabelSelectorOpIn, Values: []string{"v2"}},
		{Key: "tenant", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a"}},
	}
	got := [][]metav1.LabelSelectorRequirement{
		p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchExpressions,
		p.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector.MatchExpressions,
	}
	for i, g := range got {
		if !reflect.DeepEqual(g, want) {
			t.Errorf("term %d: %v, want %v", i, g, want)
		}
	}
}

func TestRequiredNodeAffinityKeepsPresence(t *testing.T) {
	cases := []struct {
		name string
		in   *pb.NodeAffinity
		want *v1.NodeSelector
	}{
		{"unset: no requirement", &pb.NodeAffinity{}, nil},
		{"set without terms: matches no node", &pb.NodeAffinity{Required: &pb.NodeSelector{}}, &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{}}},
	}
	for _, c := range cases {
		got := Affinity(&pb.Affinity{NodeAffinity: c.in}).NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestArgsAreDecodedDefaultedAndConvertedLikeKubeSchedulers(t *testing.T) {
	obj, err := DecodeArgs("NodeResourcesFit", []byte(`{"scoringStrategy": {"type": "MostAllocated"}}`))
	if err != nil {
		t.Fatal(err)
	}
	fit, ok := obj.(*config.NodeResourcesFitArgs)
	if !ok {
		t.Fatalf("decoded %T, want *config.NodeResourcesFitArgs", obj)
	}
	want := []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}
	if fit.ScoringStrategy.Type != config.MostAllocated || !reflect.DeepEqual(fit.ScoringStrategy.Resources, want) {
		t.Errorf("scoring strategy %+v", fit.ScoringStrategy)
	}
	if _, err := DecodeArgs("NodeResourcesFit", []byte(`{"bogus": 1}`)); err == nil || err.Error() != `decoding NodeResourcesFitArgs: json: unknown field "bogus"` {
		t.Errorf("unknown field: %v", err)
	}
	obj, err = DecodeArgs("Coscheduling", []byte(`{"permitWaitingTimeSeconds": 10}`))
	if u, ok := obj.(*runtime.Unknown); err != nil || !ok || string(u.Raw) != `{"permitWaitingTimeSeconds": 10}` {
		t.Errorf("an out-of-tree plugin's args: %#v %v", obj, err)
	}
}
