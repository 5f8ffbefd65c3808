package outrigger

import (
	"context"
	"encoding/json"
	"testing"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// nominating answers PostFilter with a node ("" for none).
type nominating struct{ node string }

func (nominating) Name() string { return "N" }
func (p nominating) PostFilter(*Call, *pb.Pod, map[string]*Status) (string, *Status) {
	return p.node, NewStatus(Unschedulable, "no victims")
}

// resulting answers PostFilterResult with a result (nil for none).
type resulting struct{ result *PostFilterResult }

func (resulting) Name() string { return "N" }
func (p resulting) PostFilterResult(*Call, *pb.Pod, map[string]*Status) (*PostFilterResult, *Status) {
	return p.result, NewStatus(Unschedulable, "no victims")
}

// panicking fails in PostFilterResult.
type panicking struct{}

func (panicking) Name() string { return "N" }
func (panicking) PostFilterResult(*Call, *pb.Pod, map[string]*Status) (*PostFilterResult, *Status) {
	panic("boom")
}

// TestPostFilterSaysWhatItDoesToTheNomination: a result overrides the pod's nomination with its node,
// "" clearing it (kube-scheduler's DefaultPreemption when no node can be made room on); no result, or
// a failed call, leaves it (PostFilterReply.nominating_mode).
func TestPostFilterSaysWhatItDoesToTheNomination(t *testing.T) {
	override, noop := pb.NominatingMode_NOMINATING_MODE_OVERRIDE, pb.NominatingMode_NOMINATING_MODE_NOOP
	cases := []struct {
		name   string
		plugin Plugin
		mode   pb.NominatingMode
		node   string
		code   pb.Code
	}{
		{"a node nominates", nominating{"n1"}, override, "n1", pb.Code_CODE_UNSCHEDULABLE},
		{"no node from PostFilter is no result", nominating{""}, noop, "", pb.Code_CODE_UNSCHEDULABLE},
		{"a result nominates its node", resulting{&PostFilterResult{NominatedNodeName: "n2"}}, override, "n2",
			pb.Code_CODE_UNSCHEDULABLE},
		{"a result naming no node clears the nomination", resulting{&PostFilterResult{}}, override, "",
			pb.Code_CODE_UNSCHEDULABLE},
		{"no result leaves the nomination", resulting{nil}, noop, "", pb.Code_CODE_UNSCHEDULABLE},
		{"a panic is an error and no result", panicking{}, noop, "", pb.Code_CODE_ERROR},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plugin := tc.plugin
			h, err := NewHost([]Registration{{Name: "N",
				Factory: func(json.RawMessage, *Env) (Plugin, error) { return plugin, nil }}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := pointsOf(plugin); len(got) != 1 || got[0] != pb.ExtensionPoint_EXTENSION_POINT_POST_FILTER {
				t.Fatalf("points = %v, want [POST_FILTER]", got)
			}
			if _, err := h.Configure(context.Background(), &pb.ConfigureRequest{Plugin: "N", Profile: "p"}); err != nil {
				t.Fatal(err)
			}
			reply, err := h.PostFilter(context.Background(), &pb.PostFilterRequest{
				Ctx: &pb.CycleContext{CycleId: "c", Plugin: "N", Profile: "p", Pod: &pb.Pod{}},
			})
			if err != nil {
				t.Fatal(err)
			}
			got := []any{reply.GetNominatingMode(), reply.GetNominatedNodeName(), reply.GetStatus().GetCode()}
			if want := []any{tc.mode, tc.node, tc.code}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
				t.Errorf("(mode, node, code) = %v, want %v", got, want)
			}
		})
	}
}
