//go:build !k8s1.34

package kube

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilsets "k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/kube/internal/fwk"
	"outrigger.dev/clients/go/outrigger"
)

// The pod group cycle's points (kube-scheduler 1.37's PlacementGenerate and PlacementScore) of an
// upstream plugin, served through the SDK's. The group cycle's CycleState is the adapter's cycle of
// the group cycle's id (a PodGroupCycleState); a placement's is the cycle of its placement cycle id (a
// PlacementCycleState whose GetPodGroupSchedulingCycle is the group's), so a plugin that writes in
// GeneratePlacements reads it back in ScorePlacement as in kube-scheduler.

// placementPoints are the pod group points p implements.
func placementPoints(p fwk.Plugin) []pb.ExtensionPoint {
	var pts []pb.ExtensionPoint
	if _, ok := p.(fwk.PlacementGeneratePlugin); ok {
		pts = append(pts, pb.ExtensionPoint_EXTENSION_POINT_PLACEMENT_GENERATE)
	}
	if ps, ok := p.(fwk.PlacementScorePlugin); ok {
		pts = append(pts, pb.ExtensionPoint_EXTENSION_POINT_PLACEMENT_SCORE)
		if ps.PlacementScoreExtensions() != nil {
			pts = append(pts, pb.ExtensionPoint_EXTENSION_POINT_NORMALIZE_PLACEMENT_SCORE)
		}
	}
	if _, ok := p.(fwk.PodGroupPostFilterPlugin); ok {
		pts = append(pts, pb.ExtensionPoint_EXTENSION_POINT_POD_GROUP_POST_FILTER)
	}
	return pts
}

// groupView is the group of the group cycle a call runs in, as the Lister's PodGroups and
// PodGroupStates answer for it.
type groupView struct {
	info *framework.PodGroupInfo
}

// podGroupInfo is the upstream PodGroupInfo of the request's group: its unscheduled pods in the
// queue's order, and its PodGroup (the API server's when the adapter watches one, else one built from
// what the contract carries: the group's name, minCount and schedulingConstraints' topology keys).
func (p *Plugin) podGroupInfo(c *outrigger.Call, g *outrigger.PodGroupInfo) *framework.PodGroupInfo {
	pods := make([]*v1.Pod, len(g.Pods))
	for i, pod := range g.Pods {
		pods[i] = Pod(pod)
	}
	pg := p.shared.lister.apiPodGroup(g.Namespace, g.Name)
	if pg == nil {
		pg = &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.Name}}
		if g.MinCount > 0 {
			pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(g.MinCount)}
		} else {
			pg.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
		}
		pg.Spec.Priority = sharedPriority(pods)
		if len(g.TopologyKeys) > 0 {
			topology := make([]schedulingv1beta1.TopologyConstraint, len(g.TopologyKeys))
			for i, key := range g.TopologyKeys {
				topology[i] = schedulingv1beta1.TopologyConstraint{Key: key}
			}
			pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: topology}
		}
	}
	info := &framework.PodGroupInfo{Namespace: g.Namespace, Name: g.Name, Type: fwk.PodGroupKeyType,
		UnscheduledPods: pods, PodGroup: pg}
	if c.Snapshot != nil {
		p.shared.lister.Set(c.Snapshot)
	}
	p.shared.lister.group.Store(&groupView{info: info})
	return info
}

// sharedPriority is the priority all of a group's pods have (the PodGroup's spec.priority as
// admission resolves it from the same priority class), or nil when they differ: the contract does not
// carry the PodGroup's own.
func sharedPriority(pods []*v1.Pod) *int32 {
	var out *int32
	for _, pod := range pods {
		if pod.Spec.Priority == nil || (out != nil && *out != *pod.Spec.Priority) {
			return nil
		}
		out = pod.Spec.Priority
	}
	return out
}

// nodeInfosOf are the NodeInfos of a placement's nodes in the call's snapshot.
func nodeInfosOf(c *outrigger.Call, names []string) ([]fwk.NodeInfo, error) {
	if c.Snapshot == nil {
		return nil, fmt.Errorf("no snapshot: the plugin does not follow the snapshot mirror")
	}
	out := make([]fwk.NodeInfo, len(names))
	for i, name := range names {
		ns := c.Snapshot.NodeByName(name)
		if ns == nil {
			return nil, fmt.Errorf("node %q is not in the snapshot of generation %d", name, c.Snapshot.Generation)
		}
		out[i] = NodeInfo(ns)
	}
	return out, nil
}

func placementNames(p *fwk.Placement) outrigger.Placement {
	out := outrigger.Placement{Name: p.Name, Nodes: make([]string, 0, len(p.Nodes))}
	for _, n := range p.Nodes {
		out.Nodes = append(out.Nodes, n.Node().Name)
	}
	return out
}

// GeneratePlacements runs the plugin's GeneratePlacements with the parent placement's NodeInfos, in
// the group cycle's state.
func (p *Plugin) GeneratePlacements(c *outrigger.Call, g *outrigger.PodGroupInfo, parent outrigger.Placement) ([]outrigger.Placement, *outrigger.Status) {
	pl, ok := p.p.(fwk.PlacementGeneratePlugin)
	if !ok {
		return nil, outrigger.NewStatus(outrigger.Error, "the plugin does not implement PlacementGenerate")
	}
	defer p.publish(c)
	info := p.podGroupInfo(c, g)
	nodes, err := nodeInfosOf(c, parent.Nodes)
	if err != nil {
		return nil, outrigger.AsStatus(err)
	}
	cyc := p.cycleOf(c)
	cyc.mu.Lock()
	defer cyc.mu.Unlock()
	result, st := pl.GeneratePlacements(c, cyc.state, info, &fwk.Placement{Name: parent.Name, Nodes: nodes})
	if !st.IsSuccess() {
		return nil, statusOf(st)
	}
	var out []outrigger.Placement
	if result != nil {
		for _, placement := range result.Placements {
			if placement != nil {
				out = append(out, placementNames(placement))
			}
		}
	}
	return out, nil
}

// proposed is one pod of a placement attempt as upstream's ProposedAssignment.
type proposed struct {
	pod   *v1.Pod
	info  fwk.PodInfo
	node  string
	state fwk.CycleState
}

func (a proposed) GetPod() *v1.Pod               { return a.pod }
func (a proposed) GetPodInfo() fwk.PodInfo       { return a.info }
func (a proposed) GetNodeName() string           { return a.node }
func (a proposed) GetCycleState() fwk.CycleState { return a.state }

// groupCycleID is the group cycle's id of a placement's cycle id ("<group cycle>/placement/<name>",
// as the framework derives it).
func groupCycleID(placementCycleID, placement string) string {
	return strings.TrimSuffix(placementCycleID, "/placement/"+placement)
}

// ScorePlacement runs the plugin's ScorePlacement in the placement's state (whose pod group cycle is
// the group cycle's state), with the pods proposed on the placement's nodes. Each pod's own
// CycleState of the attempt stays in the framework: a fresh one stands for it.
func (p *Plugin) ScorePlacement(c *outrigger.Call, g *outrigger.PodGroupInfo, placement outrigger.Placement, assigned []outrigger.ProposedAssignment) (int64, *outrigger.Status) {
	pl, ok := p.p.(fwk.PlacementScorePlugin)
	if !ok {
		return 0, outrigger.NewStatus(outrigger.Error, "the plugin does not implement PlacementScore")
	}
	defer p.publish(c)
	info := p.podGroupInfo(c, g)
	nodes, err := nodeInfosOf(c, placement.Nodes)
	if err != nil {
		return 0, outrigger.AsStatus(err)
	}
	assignments := &fwk.PodGroupAssignments{Placement: &fwk.Placement{Name: placement.Name, Nodes: nodes}}
	for _, a := range assigned {
		pod := Pod(a.Pod)
		pi, err := framework.NewPodInfo(pod)
		if err != nil {
			return 0, outrigger.AsStatus(err)
		}
		assignments.ProposedAssignments = append(assignments.ProposedAssignments,
			proposed{pod: pod, info: pi, node: a.NodeName, state: framework.NewCycleState()})
	}
	group := p.shared.cycle(groupCycleID(c.CycleID, placement.Name))
	cyc := p.cycleOf(c)
	cyc.mu.Lock()
	defer cyc.mu.Unlock()
	cyc.state.SetPodGroupSchedulingCycle(group.state)
	score, st := pl.ScorePlacement(c, cyc.state, info, assignments)
	return score, statusOf(st)
}

// NormalizePlacementScore runs the plugin's PlacementScoreExtensions in the group cycle's state.
func (p *Plugin) NormalizePlacementScore(c *outrigger.Call, g *outrigger.PodGroupInfo, placements []string, scores []int64) *outrigger.Status {
	pl, ok := p.p.(fwk.PlacementScorePlugin)
	if !ok || pl.PlacementScoreExtensions() == nil {
		return outrigger.NewStatus(outrigger.Error, "the plugin does not implement NormalizePlacementScore")
	}
	if len(placements) != len(scores) {
		return outrigger.NewStatus(outrigger.Error,
			fmt.Sprintf("%d placements for %d scores", len(placements), len(scores)))
	}
	defer p.publish(c)
	info := p.podGroupInfo(c, g)
	list := make([]fwk.PlacementScore, len(scores))
	for i := range scores {
		list[i] = fwk.PlacementScore{Placement: &fwk.Placement{Name: placements[i]}, Score: scores[i]}
	}
	cyc := p.cycleOf(c)
	cyc.mu.Lock()
	defer cyc.mu.Unlock()
	st := pl.PlacementScoreExtensions().NormalizePlacementScore(c, cyc.state, info, list)
	for i := range list {
		scores[i] = list[i].Score
	}
	return statusOf(st)
}

// ---- the Lister's pod groups -----------------------------------------------------------------------

// groupState is a pod group's PodGroupState: its scheduled pods from the snapshot (those on a node
// whose spec.schedulingGroup names it; assumed as the snapshot says) and, for the group of the
// current group cycle, its unscheduled pods.
type groupState struct {
	all, assumed, assigned utilsets.Set[types.UID]
	scheduled              []*v1.Pod
	unscheduled            map[string]*v1.Pod
}

func newGroupState() *groupState {
	return &groupState{all: utilsets.New[types.UID](), assumed: utilsets.New[types.UID](), assigned: utilsets.New[types.UID](),
		unscheduled: map[string]*v1.Pod{}}
}

func (s *groupState) AllPods() utilsets.Set[types.UID]      { return s.all }
func (s *groupState) AllPodsCount() int                     { return len(s.all) }
func (s *groupState) UnscheduledPods() map[string]*v1.Pod   { return s.unscheduled }
func (s *groupState) AssumedPods() utilsets.Set[types.UID]  { return s.assumed }
func (s *groupState) AssignedPods() utilsets.Set[types.UID] { return s.assigned }
func (s *groupState) ScheduledPods() []*v1.Pod              { return s.scheduled }
func (s *groupState) ScheduledPodsCount() int               { return len(s.scheduled) }

type scheduledGroupsKey struct{}

// scheduledGroups are the snapshot's scheduled pods by group ("namespace/name"), built once per snapshot.
func scheduledGroups(s *outrigger.Snapshot) map[string]*groupState {
	return s.Memo(scheduledGroupsKey{}, func() any {
		out := map[string]*groupState{}
		for _, ns := range s.Nodes() {
			for _, placement := range ns.Pods {
				group := placement.GetPod().GetSpec().GetSchedulingGroup()
				if group == "" {
					continue
				}
				pod := PodOfPlacement(placement)
				key := pod.Namespace + "/" + group
				st := out[key]
				if st == nil {
					st = newGroupState()
					out[key] = st
				}
				st.all.Insert(pod.UID)
				if placement.GetAssumed() {
					st.assumed.Insert(pod.UID)
				} else {
					st.assigned.Insert(pod.UID)
				}
				st.scheduled = append(st.scheduled, pod)
			}
		}
		return out
	}).(map[string]*groupState)
}

type podGroupStates struct{ l *Lister }

// Get is the group's state in the current snapshot; a group no pod names has an empty state (as the
// framework's own store answers).
func (g podGroupStates) Get(namespace, name string) (fwk.PodGroupState, error) {
	out := newGroupState()
	if st := scheduledGroups(g.l.snapshot())[namespace+"/"+name]; st != nil {
		out.all, out.assumed, out.assigned = st.all.Clone(), st.assumed, st.assigned
		out.scheduled = st.scheduled
	}
	if view, ok := g.l.group.Load().(*groupView); ok && view.info.Namespace == namespace && view.info.Name == name {
		for _, pod := range view.info.UnscheduledPods {
			if !out.all.Has(pod.UID) {
				out.all.Insert(pod.UID)
				out.unscheduled[pod.Namespace+"/"+pod.Name] = pod
			}
		}
	}
	return out, nil
}

type podGroups struct{ l *Lister }

// Get is the PodGroup of the current group cycle (or the API server's, when the adapter watches one).
func (g podGroups) Get(namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	if view, ok := g.l.group.Load().(*groupView); ok && view.info.Namespace == namespace && view.info.Name == name {
		return view.info.PodGroup, nil
	}
	if pg := g.l.apiPodGroup(namespace, name); pg != nil {
		return pg, nil
	}
	return nil, fmt.Errorf("pod group %s/%s not found", namespace, name)
}

// apiPodGroup is the API server's PodGroup (nil without --kubeconfig, or when it has none).
func (l *Lister) apiPodGroup(namespace, name string) *schedulingv1beta1.PodGroup {
	get, ok := l.podGroup.Load().(func(string, string) any)
	if !ok {
		return nil
	}
	pg, _ := get(namespace, name).(*schedulingv1beta1.PodGroup)
	return pg
}

// watchPodGroups has the informer factory watch PodGroups (before it starts) when p implements a pod
// group point and the live apiserver serves scheduling.k8s.io/v1beta1 podgroups, so the PodGroupInfo's
// PodGroup is the API server's (with all of its spec; the contract carries minCount and topology keys).
func (s *shared) watchPodGroups(p fwk.Plugin) {
	if s.kubeconfig == nil || len(placementPoints(p)) == 0 {
		return
	}
	s.groupsOnce.Do(func() {
		resources, err := s.client.Discovery().ServerResourcesForGroupVersion("scheduling.k8s.io/v1beta1")
		if err != nil {
			klog.InfoS("the apiserver serves no scheduling.k8s.io/v1beta1 PodGroups; a group's PodGroup carries its name, minCount and topology keys only", "err", err)
			return
		}
		served := false
		for _, r := range resources.APIResources {
			served = served || r.Name == "podgroups"
		}
		if !served {
			return
		}
		lister := s.informers.Scheduling().V1beta1().PodGroups().Lister()
		s.lister.podGroup.Store(func(namespace, name string) any {
			if pg, err := lister.PodGroups(namespace).Get(name); err == nil {
				return pg
			}
			return nil
		})
	})
}
