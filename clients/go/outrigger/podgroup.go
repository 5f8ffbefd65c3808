package outrigger

import (
	"context"
	"fmt"

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
