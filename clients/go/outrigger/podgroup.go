package outrigger

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// PodGroupInfo is a group being scheduled in a PodGroup cycle (GenericWorkload with
// TopologyAwareWorkloadScheduling): the PodGroup's namespace, name, minCount and topology keys
// (spec.schedulingConstraints.topology[*].key, nil when none), and its unscheduled pods in the
// queue's order.
type PodGroupInfo struct {
	Namespace, Name string
	MinCount        uint32
	TopologyKeys    []string
	Pods            []*pb.Pod
}

// Placement is a candidate set of nodes for a group: its name ("" for the placement of all nodes)
// and the names of its nodes.
type Placement struct {
	Name  string
	Nodes []string
}

// ProposedAssignment is a pod of the group placed on NodeName in a placement attempt.
type ProposedAssignment struct {
	Pod      *pb.Pod
	NodeName string
}

// PlacementGeneratePlugin splits the parent placement (every node the group may use) into candidate
// placements. Call.State is the group cycle's CycleState (Call.CycleID the group cycle's id).
type PlacementGeneratePlugin interface {
	Plugin
	GeneratePlacements(c *Call, group *PodGroupInfo, parent Placement) ([]Placement, *Status)
}

// PlacementScorePlugin scores a placement in which the whole group fits (the higher the better; in
// [0, 100] unless the plugin also implements NormalizePlacementScorePlugin). Call.State is the
// placement's CycleState.
type PlacementScorePlugin interface {
	Plugin
	ScorePlacement(c *Call, group *PodGroupInfo, placement Placement, proposed []ProposedAssignment) (int64, *Status)
}

// NormalizePlacementScorePlugin maps the raw scores of all the group's placements (names in the same
// order) into [0, 100], in place.
type NormalizePlacementScorePlugin interface {
	PlacementScorePlugin
	NormalizePlacementScore(c *Call, group *PodGroupInfo, placements []string, scores []int64) *Status
}

// podGroupPoints are the PodGroup points a plugin instance implements.
func podGroupPoints(p Plugin) []pb.ExtensionPoint {
	var pts []pb.ExtensionPoint
	if _, ok := p.(PlacementGeneratePlugin); ok {
		pts = append(pts, pb.ExtensionPoint_EXTENSION_POINT_PLACEMENT_GENERATE)
	}
	if _, ok := p.(PlacementScorePlugin); ok {
		pts = append(pts, pb.ExtensionPoint_EXTENSION_POINT_PLACEMENT_SCORE)
	}
	if _, ok := p.(NormalizePlacementScorePlugin); ok {
		pts = append(pts, pb.ExtensionPoint_EXTENSION_POINT_NORMALIZE_PLACEMENT_SCORE)
	}
	if _, ok := p.(PodGroupPostFilterPlugin); ok {
		pts = append(pts, pb.ExtensionPoint_EXTENSION_POINT_POD_GROUP_POST_FILTER)
	}
	return pts
}

// groupCycle is the CycleContext a PodGroup call runs under: the group cycle's id (or the
// placement's), its snapshot generation, the declared state entries and the trace context.
func groupCycle(g *pb.PodGroupContext, cycleID string) *pb.CycleContext {
	if cycleID == "" {
		cycleID = g.GetGroupCycleId()
	}
	return &pb.CycleContext{CycleId: cycleID, Plugin: g.GetPlugin(), Profile: g.GetProfile(),
		SnapshotGeneration: g.GetSnapshotGeneration(), State: g.GetState(), TraceContext: g.GetTraceContext()}
}

func groupOf(g *pb.PodGroupContext) *PodGroupInfo {
	return &PodGroupInfo{Namespace: g.GetNamespace(), Name: g.GetName(), MinCount: g.GetMinCount(),
		TopologyKeys: g.GetTopologyKeys(), Pods: g.GetPods()}
}

// placementOf resolves a placement's nodes: by name, or by id in the call's snapshot.
func placementOf(call *Call, msg *pb.PlacementNodes) (Placement, error) {
	out := Placement{Name: msg.GetName(), Nodes: msg.GetNodeNames()}
	if len(out.Nodes) > 0 || len(msg.GetNodeIds()) == 0 {
		return out, nil
	}
	if call.Snapshot == nil {
		return out, fmt.Errorf("node ids sent to a plugin that does not follow the snapshot mirror")
	}
	for _, id := range msg.GetNodeIds() {
		n := call.Snapshot.Node(id)
		if n == nil || n.Node == nil {
			return out, fmt.Errorf("node id %d is not in the snapshot", id)
		}
		out.Nodes = append(out.Nodes, n.Node.GetMetadata().GetName())
	}
	return out, nil
}

// GeneratePlacements runs the plugin's GeneratePlacements.
func (h *Host) GeneratePlacements(ctx context.Context, req *pb.GeneratePlacementsRequest) (*pb.GeneratePlacementsReply, error) {
	var placements []Placement
	st, call, err := h.unary(ctx, "PlacementGenerate", groupCycle(req.GetCtx(), ""), func(inst Plugin, call *Call) *Status {
		pl, ok := inst.(PlacementGeneratePlugin)
		if !ok {
			return missing("PlacementGenerate")
		}
		parent, err := placementOf(call, req.GetParent())
		if err != nil {
			return AsStatus(err)
		}
		var st *Status
		placements, st = pl.GeneratePlacements(call, groupOf(req.GetCtx()), parent)
		return st
	})
	if err != nil {
		return nil, err
	}
	reply := &pb.GeneratePlacementsReply{Status: st.ToProto(), StateWrites: writes(call)}
	if st.IsSuccess() {
		for _, p := range placements {
			reply.Placements = append(reply.Placements, &pb.PlacementNodes{Name: p.Name, NodeNames: p.Nodes})
		}
	}
	return reply, nil
}

// ScorePlacement runs the plugin's ScorePlacement.
func (h *Host) ScorePlacement(ctx context.Context, req *pb.ScorePlacementRequest) (*pb.ScorePlacementReply, error) {
	var score int64
	cyc := groupCycle(req.GetCtx(), req.GetPlacementCycleId())
	st, call, err := h.unary(ctx, "PlacementScore", cyc, func(inst Plugin, call *Call) *Status {
		pl, ok := inst.(PlacementScorePlugin)
		if !ok {
			return missing("PlacementScore")
		}
		placement, err := placementOf(call, req.GetPlacement())
		if err != nil {
			return AsStatus(err)
		}
		pods := req.GetCtx().GetPods()
		proposed := make([]ProposedAssignment, 0, len(req.GetAssignments()))
		for _, a := range req.GetAssignments() {
			if int(a.GetPod()) >= len(pods) {
				return AsStatus(fmt.Errorf("assignment names pod %d of %d", a.GetPod(), len(pods)))
			}
			proposed = append(proposed, ProposedAssignment{Pod: pods[a.GetPod()], NodeName: a.GetNodeName()})
		}
		var st *Status
		score, st = pl.ScorePlacement(call, groupOf(req.GetCtx()), placement, proposed)
		return st
	})
	if err != nil {
		return nil, err
	}
	return &pb.ScorePlacementReply{Status: st.ToProto(), Score: score, StateWrites: writes(call)}, nil
}

// NormalizePlacementScore runs the plugin's NormalizePlacementScore.
func (h *Host) NormalizePlacementScore(ctx context.Context, req *pb.NormalizePlacementScoreRequest) (*pb.NormalizePlacementScoreReply, error) {
	scores := append([]int64(nil), req.GetScores()...)
	st, call, err := h.unary(ctx, "NormalizePlacementScore", groupCycle(req.GetCtx(), ""), func(inst Plugin, call *Call) *Status {
		pl, ok := inst.(NormalizePlacementScorePlugin)
		if !ok {
			return missing("NormalizePlacementScore")
		}
		return pl.NormalizePlacementScore(call, groupOf(req.GetCtx()), req.GetPlacements(), scores)
	})
	if err != nil {
		return nil, err
	}
	return &pb.NormalizePlacementScoreReply{Status: st.ToProto(), Scores: scores, StateWrites: writes(call)}, nil
}

// PodGroupScheduleResult is what scheduling the group again found: the placement its pods were placed
// in ("" for the placement of all nodes) and each pod the algorithm reached with its node ("" for
// none).
type PodGroupScheduleResult struct {
	Placement string
	Proposed  []ProposedAssignment
}

// PodGroupSchedulingFunc schedules the group again in the cycle's snapshot with the pods named (by
// uid) taken out, nothing kept (kube-scheduler's PodGroupSchedulingFunc over the mutated snapshot): the
// assignments found and the group's status. The framework answers it over the call's stream, at most
// PodGroupPostFilterStart.max_schedules times per call.
type PodGroupSchedulingFunc func(removedUIDs []string) (*PodGroupScheduleResult, *Status)

// GroupVictim is a pod the framework evicts so that the group can be placed, and the node it is on.
type GroupVictim struct {
	Pod      *pb.PodRef
	NodeName string
}

// PodGroupPostFilterResult is what a PodGroupPostFilter plugin made possible: the node each pod of
// the group is nominated to (Nominations: a pod of the group and its node) and the pods the framework
// is to evict for it.
type PodGroupPostFilterResult struct {
	Nominations []ProposedAssignment
	Victims     []GroupVictim
}

// PodGroupPostFilterPlugin runs when a group could not be placed (preemption for groups): Success
// with the nominations and victims, or a rejection saying why not. Call.State is the group cycle's
// CycleState.
type PodGroupPostFilterPlugin interface {
	Plugin
	PodGroupPostFilter(c *Call, group *PodGroupInfo, schedule PodGroupSchedulingFunc) (*PodGroupPostFilterResult, *Status)
}

// PodGroupPostFilter serves the stream: the start, the plugin's asks to schedule the group again (each
// sent, its answer received), then its result.
func (h *Host) PodGroupPostFilter(stream pb.Plugin_PodGroupPostFilterServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return grpcstatus.Error(codes.InvalidArgument, "a PodGroupPostFilter stream must start with PodGroupPostFilterStart")
	}
	group := groupOf(start.GetCtx())
	var result *PodGroupPostFilterResult
	asks := uint32(0)
	schedule := func(removed []string) (*PodGroupScheduleResult, *Status) {
		asks++
		if asks > start.GetMaxSchedules() {
			return nil, AsStatus(fmt.Errorf("the group may be scheduled again at most %d times in one PodGroupPostFilter",
				start.GetMaxSchedules()))
		}
		ask := &pb.PodGroupSchedule{}
		for _, uid := range removed {
			ask.RemovedPods = append(ask.RemovedPods, &pb.PodRef{Uid: uid})
		}
		if err := stream.Send(&pb.PodGroupPostFilterReply{Msg: &pb.PodGroupPostFilterReply_Schedule{Schedule: ask}}); err != nil {
			return nil, AsStatus(err)
		}
		msg, err := stream.Recv()
		if err != nil {
			return nil, AsStatus(err)
		}
		got := msg.GetScheduled()
		if got == nil {
			return nil, AsStatus(fmt.Errorf("the framework answered a schedule with something else"))
		}
		out := &PodGroupScheduleResult{Placement: got.GetPlacement()}
		for _, a := range got.GetAssignments() {
			if int(a.GetPod()) < len(group.Pods) {
				out.Proposed = append(out.Proposed, ProposedAssignment{Pod: group.Pods[a.GetPod()], NodeName: a.GetNodeName()})
			}
		}
		return out, StatusFromProto(got.GetStatus())
	}
	st, call, err := h.unary(stream.Context(), "PodGroupPostFilter", groupCycle(start.GetCtx(), ""), func(inst Plugin, call *Call) *Status {
		pl, ok := inst.(PodGroupPostFilterPlugin)
		if !ok {
			return missing("PodGroupPostFilter")
		}
		var st *Status
		result, st = pl.PodGroupPostFilter(call, group, schedule)
		return st
	})
	if err != nil {
		return err
	}
	out := &pb.PodGroupPostFilterResult{StateWrites: writes(call)}
	if st.IsSuccess() && result != nil {
		var bad *Status
		if out.Nominations, bad = nominations(group, result.Nominations); bad != nil {
			st = bad
		}
		for _, v := range result.Victims {
			out.Victims = append(out.Victims, &pb.PodGroupVictim{Pod: v.Pod, NodeName: v.NodeName})
		}
	}
	if !st.IsSuccess() {
		out.Nominations, out.Victims = nil, nil
	}
	out.Status = st.ToProto()
	return stream.Send(&pb.PodGroupPostFilterReply{Msg: &pb.PodGroupPostFilterReply_Result{Result: out}})
}

// nominations indexes each nominated pod in the group's pods; an Error status for a pod not of the group.
func nominations(group *PodGroupInfo, in []ProposedAssignment) ([]*pb.PlacementAssignment, *Status) {
	var out []*pb.PlacementAssignment
	for _, a := range in {
		i := -1
		for j, p := range group.Pods {
			if p == a.Pod || (p.GetMetadata().GetUid() != "" && p.GetMetadata().GetUid() == a.Pod.GetMetadata().GetUid()) {
				i = j
				break
			}
		}
		if i < 0 {
			return nil, AsStatus(fmt.Errorf("nominated pod %s/%s is not an unscheduled pod of pod group %s/%s",
				a.Pod.GetMetadata().GetNamespace(), a.Pod.GetMetadata().GetName(), group.Namespace, group.Name))
		}
		out = append(out, &pb.PlacementAssignment{Pod: uint32(i), NodeName: a.NodeName})
	}
	return out, nil
}
