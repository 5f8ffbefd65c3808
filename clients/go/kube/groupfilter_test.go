//go:build !k8s1.34

package kube

import (
	"context"
	"io"
	"reflect"
	"sort"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/outrigger"
)

// The framework's side of a PodGroupPostFilter stream for upstream DefaultPreemption served by the
// adapter. The framework is simulated: two nodes n1 (4 cpu) and n2 (1 cpu), each full with a pod of
// priority 1 (l1: 4 cpu on n1, l2: 1 cpu on n2); the gang g has two 1-cpu pods of priority 10 and
// minCount 2. Scheduling the group places each pod on the node with the most cpu left (the first by
// name on a tie), as NodeResourcesFit's LeastAllocated would.

var preemptNodes = []struct {
	name string
	cpu  int64
}{{"n1", 4}, {"n2", 1}}

type lowPod struct {
	name, node string
	cpu        int64
	priority   int64
}

func fullPod(name, node string, priority int64, group string) *pb.Pod {
	pod := &pb.Pod{Metadata: &pb.ObjectMeta{Name: name, Namespace: "default", Uid: "uid-" + name},
		Spec: &pb.PodSpec{NodeName: node, Priority: priority}}
	if group != "" {
		pod.Spec.SchedulingGroup = &group
	}
	return pod
}

// preemptSnapshot is the mirror's delta of the nodes and the running pods.
func preemptSnapshot(running []lowPod) *pb.SnapshotDelta {
	delta := &pb.SnapshotDelta{Generation: 1, FullResync: true}
	for i, n := range preemptNodes {
		delta.Nodes = append(delta.Nodes, &pb.NodeUpsert{Id: uint32(i + 1), Node: &pb.Node{
			Metadata: &pb.ObjectMeta{Name: n.name}, Status: &pb.NodeStatus{Allocatable: map[string]int64{"cpu": n.cpu * 1000}}}})
	}
	for _, p := range running {
		id := uint32(1)
		if p.node == "n2" {
			id = 2
		}
		delta.PodsAdded = append(delta.PodsAdded, &pb.PodPlacement{
			Ref:    &pb.PodRef{Uid: "uid-" + p.name, Namespace: "default", Name: p.name},
			NodeId: id, NodeName: p.node, Priority: p.priority, Pod: fullPod(p.name, p.node, p.priority, "")})
	}
	return delta
}

// simulate schedules the gang (each pod needing gangCPU) with the pods removed taken out.
func simulate(running []lowPod, gang []*pb.Pod, gangCPU int64, removed []*pb.PodRef) *pb.PodGroupScheduleResult {
	free := map[string]int64{}
	for _, n := range preemptNodes {
		free[n.name] = n.cpu
	}
	out := map[string]bool{}
	for _, r := range removed {
		out[r.GetUid()] = true
	}
	for _, p := range running {
		if !out["uid-"+p.name] {
			free[p.node] -= p.cpu
		}
	}
	res := &pb.PodGroupScheduleResult{Status: &pb.Status{}}
	placed := 0
	for i := range gang {
		best := ""
		for _, n := range preemptNodes {
			if free[n.name] >= gangCPU && (best == "" || free[n.name] > free[best]) {
				best = n.name
			}
		}
		res.Assignments = append(res.Assignments, &pb.PlacementAssignment{Pod: uint32(i), NodeName: best})
		if best != "" {
			free[best] -= gangCPU
			placed++
		}
	}
	if placed < len(gang) {
		res.Status = &pb.Status{Code: pb.Code_CODE_UNSCHEDULABLE, Reasons: []string{"0/2 nodes are available: 2 Insufficient cpu."}}
	}
	return res
}

// preemptStream is the framework's side of one stream: the start, then each ask answered by simulate.
type preemptStream struct {
	grpc.ServerStream
	start   *pb.PodGroupPostFilterStart
	answer  func([]*pb.PodRef) *pb.PodGroupScheduleResult
	started bool
	asks    [][]string
	pending []*pb.PodRef
	result  *pb.PodGroupPostFilterResult
}

func (s *preemptStream) Context() context.Context { return context.Background() }

func (s *preemptStream) Send(m *pb.PodGroupPostFilterReply) error {
	if ask := m.GetSchedule(); ask != nil {
		var names []string
		for _, r := range ask.GetRemovedPods() {
			names = append(names, strings.TrimPrefix(r.GetUid(), "uid-"))
		}
		sort.Strings(names)
		s.asks = append(s.asks, names)
		s.pending = ask.GetRemovedPods()
		return nil
	}
	s.result = m.GetResult()
	return nil
}

func (s *preemptStream) Recv() (*pb.PodGroupPostFilterRequest, error) {
	if !s.started {
		s.started = true
		return &pb.PodGroupPostFilterRequest{Msg: &pb.PodGroupPostFilterRequest_Start{Start: s.start}}, nil
	}
	if s.pending == nil && len(s.asks) == 0 {
		return nil, io.EOF
	}
	answer := s.answer(s.pending)
	s.pending = nil
	return &pb.PodGroupPostFilterRequest{Msg: &pb.PodGroupPostFilterRequest_Scheduled{Scheduled: answer}}, nil
}

// preemptHost serves upstream DefaultPreemption (GenericWorkload on, preemption synchronous) through
// the adapter and the SDK's host, with the mirror holding running.
func preemptHost(t *testing.T, running []lowPod) *outrigger.Host {
	t.Helper()
	fts := plfeature.Features{EnableGenericWorkload: true}
	regs, err := Registrations(Config{}, WithPlugin(defaultpreemption.Name, frameworkruntime.FactoryAdapter(fts, defaultpreemption.New)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := outrigger.NewHost(regs, outrigger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.Mirror().Apply(preemptSnapshot(running))
	if _, err := h.Configure(context.Background(), &pb.ConfigureRequest{Plugin: defaultpreemption.Name, Profile: "p"}); err != nil {
		t.Fatal(err)
	}
	return h
}

type preemptOutcome struct {
	code        pb.Code
	message     string
	asks        [][]string
	victims     []string
	nominations []string
}

// TestUpstreamDefaultPreemptionPreemptsForAGangThroughTheAdapter: upstream DefaultPreemption's
// PodGroupPostFilter asks to schedule the gang without every lower-priority pod, then once per victim
// to reprieve it (the gang placed without it taken out); the victims are the pods it deleted, the
// nominations the first answer's nodes. What the stream cannot carry is an Error, with no victim.
func TestUpstreamDefaultPreemptionPreemptsForAGangThroughTheAdapter(t *testing.T) {
	low := []lowPod{{"l1", "n1", 4, 1}, {"l2", "n2", 1, 1}}
	cases := []struct {
		name         string
		running      []lowPod
		gangPriority int64
		gangCPU      int64
		maxSchedules uint32
		want         preemptOutcome
	}{
		{"l1 is evicted, l2 reprieved, both pods nominated to n1", low, 10, 1, 16, preemptOutcome{
			code: pb.Code_CODE_SUCCESS,
			// all lower pods out; then each victim put back in turn (equal priority: either order)
			asks:        [][]string{{"l1", "l2"}, {"l2"}, {"l1"}},
			victims:     []string{"default/l1@n1"},
			nominations: []string{"p0@n1", "p1@n1"}}},
		{"the gang does not fit even without every lower pod", low, 10, 5, 16, preemptOutcome{
			code: pb.Code_CODE_UNSCHEDULABLE, message: "pod group preemption: 0/2 nodes are available: 2 Insufficient cpu.",
			asks: [][]string{{"l1", "l2"}}}},
		{"no pod has a lower priority", low, 1, 1, 16, preemptOutcome{
			code:    pb.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE,
			message: "pod group preemption: No preemption victims found for incoming preemptor"}},
		{"more asks than the stream allows", low, 10, 1, 2, preemptOutcome{
			code: pb.Code_CODE_ERROR,
			message: "PodGroupPostFilter could not be answered over the contract: scheduling the group again: " +
				"the group may be scheduled again at most 2 times in one PodGroupPostFilter",
			asks: [][]string{{"l1", "l2"}, {"l2"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := preemptHost(t, tc.running)
			gang := []*pb.Pod{fullPod("p0", "", tc.gangPriority, "g"), fullPod("p1", "", tc.gangPriority, "g")}
			stream := &preemptStream{
				start: &pb.PodGroupPostFilterStart{MaxSchedules: tc.maxSchedules, Ctx: &pb.PodGroupContext{
					GroupCycleId: "gc1", Plugin: defaultpreemption.Name, Profile: "p", SnapshotGeneration: 1,
					Namespace: "default", Name: "g", MinCount: 2, Pods: gang}},
				answer: func(removed []*pb.PodRef) *pb.PodGroupScheduleResult {
					return simulate(tc.running, gang, tc.gangCPU, removed)
				}}
			if err := h.PodGroupPostFilter(stream); err != nil {
				t.Fatal(err)
			}
			r := stream.result
			got := preemptOutcome{code: r.GetStatus().GetCode(), message: strings.Join(r.GetStatus().GetReasons(), ", "), asks: stream.asks}
			for _, v := range r.GetVictims() {
				got.victims = append(got.victims, v.GetPod().GetNamespace()+"/"+v.GetPod().GetName()+"@"+v.GetNodeName())
			}
			for _, n := range r.GetNominations() {
				got.nominations = append(got.nominations, gang[n.GetPod()].GetMetadata().GetName()+"@"+n.GetNodeName())
			}
			if len(got.asks) == 3 && reflect.DeepEqual(got.asks[1:], [][]string{{"l1"}, {"l2"}}) {
				got.asks[1], got.asks[2] = got.asks[2], got.asks[1]
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("outcome\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
