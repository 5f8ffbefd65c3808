package kube

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/kube/internal/fwk"
	"outrigger.dev/clients/go/outrigger"
)

// sibling puts the pods it names in PodsToActivate at Permit and waits, as Coscheduling does with a
// gang's siblings.
type sibling struct{ names []string }

func (sibling) Name() string { return "Sibling" }

func (s sibling) Permit(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	data, err := state.Read(framework.PodsToActivateKey)
	if err != nil {
		return fwk.AsStatus(err), 0
	}
	pods := data.(*framework.PodsToActivate)
	pods.Lock()
	for _, name := range s.names {
		pods.Map[pod.Namespace+"/"+name] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name}}
	}
	pods.Unlock()
	return fwk.NewStatus(fwk.Wait), time.Second
}

func TestPodsToActivateRideOnTheReply(t *testing.T) {
	cases := []struct {
		name  string
		calls [][]string // the siblings each Permit call of one cycle adds
		want  []string   // the entry each reply carries ("" for none)
	}{
		{"none", [][]string{nil}, []string{""}},
		{"siblings", [][]string{{"b", "a"}}, []string{`["ns/a","ns/b"]`}},
		{"only what grew", [][]string{{"a"}, {"a"}, {"b"}}, []string{`["ns/a"]`, "", `["ns/a","ns/b"]`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			factory := func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
				return sibling{names: names}, nil
			}
			regs, err := Registrations(Config{}, WithPlugin("Sibling", factory))
			if err != nil {
				t.Fatal(err)
			}
			env := &outrigger.Env{Profile: "p", Framework: func() *outrigger.Framework { return nil }}
			cycleID := "cycle-" + tc.name
			for i, added := range tc.calls {
				names = added
				inst, err := regs[0].Factory(json.RawMessage("{}"), env)
				if err != nil {
					t.Fatal(err)
				}
				ctx := &pb.CycleContext{CycleId: cycleID, Plugin: "Sibling", Profile: "p"}
				c := &outrigger.Call{Context: context.Background(), CycleID: cycleID, State: outrigger.NewCycleState(ctx, nil)}
				pod := &pb.Pod{Metadata: &pb.ObjectMeta{Namespace: "ns", Name: "p0"}}
				if st, _ := inst.(*Plugin).Permit(c, pod, "node"); st == nil || st.Code != outrigger.Wait {
					t.Fatalf("Permit: %v", st)
				}
				got := ""
				for _, w := range c.State.Pending() {
					if w.GetKey() == PodsToActivateKey {
						got = string(w.GetValue())
					}
				}
				if got != tc.want[i] {
					t.Errorf("reply %d carries %q, want %q", i, got, tc.want[i])
				}
			}
		})
	}
}
