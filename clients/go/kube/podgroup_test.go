//go:build !k8s1.34

package kube

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-scheduler/framework"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podgrouppodscount"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/topologyaware"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/outrigger"
)

// groupMember is a pod of group (in namespace "default") placed on node id as the mirror holds it.
func groupMember(name, group string, id uint32, assumed bool) *pb.PodPlacement {
	ref := &pb.PodRef{Uid: "uid-" + name, Namespace: "default", Name: name}
	pod := &pb.Pod{Metadata: &pb.ObjectMeta{Name: name, Namespace: "default", Uid: ref.Uid},
		Spec: &pb.PodSpec{SchedulingGroup: &group}}
	return &pb.PodPlacement{Ref: ref, NodeId: id, NodeName: rackNodes[id-1], Assumed: assumed, Pod: pod}
}

var rackNodes = []string{"a1", "a2", "b1"}

// groupSnapshot: a1 and a2 in rack-a, b1 in rack-b; group g has a pod bound on a1 and one assumed on
// a2, group h one on b1.
func groupSnapshot() *outrigger.Snapshot {
	m := outrigger.NewMirror(0)
	delta := &pb.SnapshotDelta{Generation: 1, FullResync: true, PodsAdded: []*pb.PodPlacement{
		groupMember("bound", "g", 1, false), groupMember("assumed", "g", 2, true), groupMember("other", "h", 3, false)}}
	for i, name := range rackNodes {
		delta.Nodes = append(delta.Nodes, &pb.NodeUpsert{Id: uint32(i + 1), Node: &pb.Node{
			Metadata: &pb.ObjectMeta{Name: name, Labels: map[string]string{"rack": "rack-" + name[:1]}}}})
	}
	m.Apply(delta)
	return m.Latest()
}

// adapt builds the adapter's Plugin of one upstream plugin factory.
func adapt(t *testing.T, name string, factory frameworkruntime.PluginFactory) *Plugin {
	t.Helper()
	regs, err := Registrations(Config{}, WithPlugin(name, factory))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := regs[0].Factory(json.RawMessage(nil), &outrigger.Env{Framework: func() *outrigger.Framework { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return inst.(*Plugin)
}

func groupCall(point, cycleID string) *outrigger.Call {
	return &outrigger.Call{Context: context.Background(), Point: point, Plugin: "P", Profile: "p", CycleID: cycleID,
		Snapshot: groupSnapshot()}
}

var trainGroup = &outrigger.PodGroupInfo{Namespace: "default", Name: "g", MinCount: 3,
	Pods: []*pb.Pod{{Metadata: &pb.ObjectMeta{Name: "new", Namespace: "default", Uid: "uid-new"}}}}

// TestPodGroupStatesComeFromTheSnapshot: a group's scheduled pods are the snapshot's pods naming it
// (assumed or assigned as the mirror says), its unscheduled pods those of the group cycle the call runs
// in; a group no pod names has an empty state.
func TestPodGroupStatesComeFromTheSnapshot(t *testing.T) {
	p := adapt(t, podgrouppodscount.Name, frameworkruntime.FactoryAdapter(plfeature.Features{}, podgrouppodscount.New))
	p.podGroupInfo(groupCall("PlacementScore", "c1/placement/rack-a"), trainGroup)
	l := p.shared.lister
	cases := []struct {
		group                        string
		scheduled, assumed, assigned []string
		unscheduled                  []string
	}{
		{"g", []string{"assumed", "bound"}, []string{"uid-assumed"}, []string{"uid-bound"}, []string{"default/new"}},
		{"h", []string{"other"}, nil, []string{"uid-other"}, nil},
		{"none", nil, nil, nil, nil},
	}
	for _, tc := range cases {
		st, err := l.PodGroupStates().Get("default", tc.group)
		if err != nil {
			t.Fatalf("%s: %v", tc.group, err)
		}
		var scheduled, unscheduled []string
		for _, pod := range st.ScheduledPods() {
			scheduled = append(scheduled, pod.Name)
		}
		for key := range st.UnscheduledPods() {
			unscheduled = append(unscheduled, key)
		}
		sort.Strings(scheduled)
		got := []any{scheduled, st.ScheduledPodsCount(), sortedUIDs(st.AssumedPods().UnsortedList()),
			sortedUIDs(st.AssignedPods().UnsortedList()), unscheduled, st.AllPodsCount()}
		want := []any{tc.scheduled, len(tc.scheduled), tc.assumed, tc.assigned, tc.unscheduled,
			len(tc.scheduled) + len(tc.unscheduled)}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: state %v, want %v", tc.group, got, want)
		}
	}
	pg, err := l.PodGroups().Get("default", "g")
	if err != nil || pg.Spec.SchedulingPolicy.Gang == nil || pg.Spec.SchedulingPolicy.Gang.MinCount != 3 {
		t.Errorf("PodGroup of the cycle: %v (%v), want default/g with a gang of minCount 3", pg, err)
	}
	if _, err := l.PodGroups().Get("default", "h"); err == nil || err.Error() != "pod group default/h not found" {
		t.Errorf("another group: %v, want not found", err)
	}
}

func sortedUIDs[T ~string](in []T) []string {
	var out []string
	for _, u := range in {
		out = append(out, string(u))
	}
	sort.Strings(out)
	return out
}

// TestUpstreamPodGroupPodsCountThroughTheAdapter: kube-scheduler's PodGroupPodsCount scores a placement
// by the group's scheduled pods (2 in the snapshot) and the proposed ones, and normalizes by the
// highest; all zero is its error.
func TestUpstreamPodGroupPodsCountThroughTheAdapter(t *testing.T) {
	p := adapt(t, podgrouppodscount.Name, frameworkruntime.FactoryAdapter(plfeature.Features{}, podgrouppodscount.New))
	if got, want := p.points(), []pb.ExtensionPoint{pb.ExtensionPoint_EXTENSION_POINT_PLACEMENT_SCORE,
		pb.ExtensionPoint_EXTENSION_POINT_NORMALIZE_PLACEMENT_SCORE}; !reflect.DeepEqual(got, want) {
		t.Fatalf("points %v, want %v", got, want)
	}
	proposed := []outrigger.ProposedAssignment{{Pod: trainGroup.Pods[0], NodeName: "a1"}, {Pod: trainGroup.Pods[0], NodeName: "a2"}}
	score, st := p.ScorePlacement(groupCall("PlacementScore", "c1/placement/rack-a"), trainGroup,
		outrigger.Placement{Name: "rack-a", Nodes: []string{"a1", "a2"}}, proposed)
	if score != 4 || st != nil {
		t.Errorf("score %d (%v), want 4", score, st)
	}
	scores := []int64{4, 2, 3}
	if st := p.NormalizePlacementScore(groupCall("NormalizePlacementScore", "c1"), trainGroup,
		[]string{"rack-a", "rack-b", "rack-c"}, scores); st != nil || !reflect.DeepEqual(scores, []int64{100, 50, 75}) {
		t.Errorf("normalized %v (%v), want [100 50 75]", scores, st)
	}
	zero := []int64{0, 0}
	st = p.NormalizePlacementScore(groupCall("NormalizePlacementScore", "c1"), trainGroup, []string{"x", "y"}, zero)
	if st == nil || st.Code != outrigger.Error || st.Reasons[0] != "no pods from pod group are assigned to any of the candidate placements" {
		t.Errorf("all zero: %v, want the plugin's error", st)
	}
	if st := p.NormalizePlacementScore(groupCall("NormalizePlacementScore", "c1"), trainGroup, []string{"x"}, zero); st == nil ||
		st.Reasons[0] != "1 placements for 2 scores" {
		t.Errorf("mismatched lengths: %v, want an error naming them", st)
	}
}

// TestUpstreamTopologyPlacementGeneratorThroughTheAdapter: without the API server's PodGroup (no
// --kubeconfig) the group's PodGroup gets the topology keys the contract carries: with none the plugin
// answers the parent placement; with "rack" one placement per rack, or only the rack of the group's
// scheduled pods (g's are on rack-a); with a key no node has, its error about the scheduled pods.
func TestUpstreamTopologyPlacementGeneratorThroughTheAdapter(t *testing.T) {
	p := adapt(t, topologyaware.Name, frameworkruntime.FactoryAdapter(plfeature.Features{}, topologyaware.New))
	if got, want := p.points(), []pb.ExtensionPoint{pb.ExtensionPoint_EXTENSION_POINT_PLACEMENT_GENERATE}; !reflect.DeepEqual(got, want) {
		t.Fatalf("points %v, want %v", got, want)
	}
	cases := []struct {
		group   string
		keys    []string
		want    []outrigger.Placement
		wantErr string
	}{
		{"g", nil, []outrigger.Placement{{Name: "", Nodes: rackNodes}}, ""},
		{"g", []string{"rack"}, []outrigger.Placement{{Name: "rack-a", Nodes: []string{"a1", "a2"}}}, ""},
		{"fresh", []string{"rack"}, []outrigger.Placement{{Name: "rack-a", Nodes: []string{"a1", "a2"}}, {Name: "rack-b", Nodes: []string{"b1"}}}, ""},
		{"g", []string{"zone"}, nil, "cannot determine domain for already scheduled pods: no topology domain found for pod default/bound"},
	}
	for _, tc := range cases {
		group := *trainGroup
		group.Name, group.TopologyKeys = tc.group, tc.keys
		got, st := p.GeneratePlacements(groupCall("PlacementGenerate", "c1"), &group, outrigger.Placement{Nodes: rackNodes})
		var reason string
		if st != nil {
			reason = strings.Join(st.Reasons, "; ")
		}
		// Upstream walks a Go map of domains: its placements come in either order.
		sort.Slice(got, func(i, j int) bool { return got[i].Name < got[j].Name })
		if reason != tc.wantErr || (tc.wantErr == "" && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("keys %v: placements %v (%q), want %v (%q)", tc.keys, got, reason, tc.want, tc.wantErr)
		}
		pg, err := p.shared.lister.PodGroups().Get("default", tc.group)
		var keys []string
		if err == nil && pg.Spec.SchedulingConstraints != nil {
			for _, c := range pg.Spec.SchedulingConstraints.Topology {
				keys = append(keys, c.Key)
			}
		}
		if err != nil || !reflect.DeepEqual(keys, tc.keys) {
			t.Errorf("keys %v: the PodGroup's topology keys are %v (%v)", tc.keys, keys, err)
		}
	}
	_, st := p.GeneratePlacements(groupCall("PlacementGenerate", "c1"), trainGroup, outrigger.Placement{Nodes: []string{"zz"}})
	if st == nil || st.Reasons[0] != `node "zz" is not in the snapshot of generation 1` {
		t.Errorf("unknown node: %v, want an error naming it", st)
	}
}

// stateful writes in GeneratePlacements and reads the group cycle's state back in ScorePlacement
// through the placement's state, as kube-scheduler's plugins may.
type stateful struct{}

type written struct{ n int64 }

func (w written) Clone() framework.StateData { return w }

func (stateful) Name() string { return "S" }
func (stateful) GeneratePlacements(_ context.Context, state framework.PodGroupCycleState, g framework.PodGroupInfo,
	parent *framework.Placement) (*framework.GeneratePlacementsResult, *framework.Status) {
	state.Write("S/pods", written{int64(len(g.GetUnscheduledPods()) * 7)})
	return &framework.GeneratePlacementsResult{Placements: []*framework.Placement{parent}}, nil
}
func (stateful) ScorePlacement(_ context.Context, state framework.PlacementCycleState, _ framework.PodGroupInfo,
	_ *framework.PodGroupAssignments) (int64, *framework.Status) {
	data, err := state.GetPodGroupSchedulingCycle().Read("S/pods")
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	return data.(written).n, nil
}
func (stateful) PlacementScoreExtensions() framework.PlacementScoreExtensions { return nil }

func TestThePlacementStateReachesTheGroupCycleState(t *testing.T) {
	p := adapt(t, "S", func(context.Context, runtime.Object, framework.Handle) (framework.Plugin, error) {
		return stateful{}, nil
	})
	if got, want := p.points(), []pb.ExtensionPoint{pb.ExtensionPoint_EXTENSION_POINT_PLACEMENT_GENERATE,
		pb.ExtensionPoint_EXTENSION_POINT_PLACEMENT_SCORE}; !reflect.DeepEqual(got, want) {
		t.Fatalf("points %v, want %v", got, want)
	}
	if _, st := p.GeneratePlacements(groupCall("PlacementGenerate", "c9"), trainGroup, outrigger.Placement{Nodes: rackNodes}); st != nil {
		t.Fatal(st)
	}
	score, st := p.ScorePlacement(groupCall("PlacementScore", "c9/placement/"), trainGroup, outrigger.Placement{Nodes: rackNodes}, nil)
	if score != 7 || st != nil {
		t.Errorf("score %d (%v), want 7 (what GeneratePlacements wrote)", score, st)
	}
}
