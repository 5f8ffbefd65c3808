//go:build !k8s1.34

package kube

import (
	"testing"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

func TestAPodsSchedulingGroupCrossesTheWire(t *testing.T) {
	group := "train"
	cases := []struct {
		name string
		in   *string
		want string // "" when the pod has no spec.schedulingGroup
	}{
		{"member of a group", &group, "train"},
		{"no group", nil, ""},
	}
	if p := Pod(&pb.Pod{Metadata: &pb.ObjectMeta{Name: "p"}}); p.Spec.SchedulingGroup != nil {
		t.Errorf("a pod without a spec: schedulingGroup %v, want none", p.Spec.SchedulingGroup)
	}
	for _, c := range cases {
		p := Pod(&pb.Pod{Metadata: &pb.ObjectMeta{Name: "p", Namespace: "ml"}, Spec: &pb.PodSpec{SchedulingGroup: c.in}})
		got := ""
		if sg := p.Spec.SchedulingGroup; sg != nil {
			if sg.PodGroupName == nil {
				t.Fatalf("%s: schedulingGroup without podGroupName", c.name)
			}
			got = *sg.PodGroupName
		}
		if got != c.want {
			t.Errorf("%s: podGroupName %q, want %q", c.name, got, c.want)
		}
	}
}
