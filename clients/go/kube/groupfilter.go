//go:build !k8s1.34

package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/kube/internal/fwk"
	"outrigger.dev/clients/go/outrigger"
)

// PodGroupPostFilter of an upstream plugin (kube-scheduler 1.37's DefaultPreemption for a group),
// served over the contract's stream. What the plugin asks its Handle for during the call is mapped:
//
//   - MutableSnapshotSharedLister: StartMutations clones the snapshot's NodeInfos, RemovePod and
//     AddPod change the clones and keep the set of the snapshot's pods taken out; EndMutations drops it.
//   - the PodGroupSchedulingFunc, and RunFilterPluginsWithNominatedPods: an ask to schedule the group
//     again with the pods taken out at that moment (one ask per distinct set, answered from the last
//     answer while the set is the same). A proposed pod passes Filter when that answer placed it.
//   - RunPreFilterExtensionAddPod/RemovePod and Reserve/Unreserve: nothing to do (every ask is a fresh
//     group cycle in the framework) and Success.
//   - ClientSet: a client that deletes nothing; the pods the plugin deletes through it are the
//     result's victims (the framework evicts them), its status patches go nowhere. Waiting pods and
//     pods in PreBind are not handed to the plugin, so it evicts them by deletion too.
//
// A call that would ask more than the stream allows, or that took pods out without deleting them
// (asynchronous preemption), is an Error: no victim, no nomination.

// groupPreemption is the state of one PodGroupPostFilter call.
type groupPreemption struct {
	group    *framework.PodGroupInfo
	schedule outrigger.PodGroupSchedulingFunc
	fake     *fake.Clientset

	mu       sync.Mutex
	mutating bool
	nodes    map[string]*framework.NodeInfo
	list     []fwk.NodeInfo
	removed  map[types.UID]*v1.Pod
	assumed  map[types.UID]bool
	deleted  []*v1.Pod
	askedFor string
	answer   *outrigger.PodGroupScheduleResult
	answerSt *outrigger.Status
	err      error
}

func newGroupPreemption(info *framework.PodGroupInfo, schedule outrigger.PodGroupSchedulingFunc) *groupPreemption {
	g := &groupPreemption{group: info, schedule: schedule, removed: map[types.UID]*v1.Pod{},
		assumed: map[types.UID]bool{}, fake: fake.NewClientset()}
	// Prepended first, so consulted last: what is neither a pod's deletion nor a status patch.
	g.fake.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("%s %s is not available to a PodGroupPostFilter served out of process "+
			"(the framework evicts the victims and nominates the group)", a.GetVerb(), a.GetResource().Resource)
	})
	g.fake.PrependReactor("delete", "pods", g.onDelete)
	g.fake.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &v1.Pod{}, nil
	})
	return g
}

// onDelete records a pod the plugin deletes: it must be one it took out of the snapshot.
func (g *groupPreemption) onDelete(a k8stesting.Action) (bool, runtime.Object, error) {
	d, ok := a.(k8stesting.DeleteAction)
	if !ok {
		return false, nil, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, pod := range g.removed {
		if pod.Namespace == d.GetNamespace() && pod.Name == d.GetName() {
			g.deleted = append(g.deleted, pod)
			return true, nil, nil
		}
	}
	err := fmt.Errorf("the plugin deleted pod %s/%s, which it had not taken out of the snapshot", d.GetNamespace(), d.GetName())
	g.fail(err)
	return true, nil, err
}

func (g *groupPreemption) fail(err error) {
	if g.err == nil {
		g.err = err
	}
}

func (g *groupPreemption) client() clientset.Interface { return g.fake }

// removedKey is the set of the snapshot's pods taken out, as the asks' cache key.
func (g *groupPreemption) removedKey() (string, []string) {
	uids := make([]string, 0, len(g.removed))
	for uid := range g.removed {
		uids = append(uids, string(uid))
	}
	sort.Strings(uids)
	return strings.Join(uids, ","), uids
}

// ask schedules the group again with the pods taken out now (the last answer when they are the
// same). An answer the stream could not give (the asks are spent, the stream broke) fails the call.
func (g *groupPreemption) ask() (*outrigger.PodGroupScheduleResult, *outrigger.Status) {
	g.mu.Lock()
	key, uids := g.removedKey()
	if g.answerSt != nil && key == g.askedFor {
		defer g.mu.Unlock()
		return g.answer, g.answerSt
	}
	g.mu.Unlock()
	answer, st := g.schedule(uids)
	g.mu.Lock()
	defer g.mu.Unlock()
	if st != nil && st.Code == outrigger.Error {
		g.fail(fmt.Errorf("scheduling the group again: %s", st.Message()))
	}
	if st == nil {
		st = outrigger.NewStatus(outrigger.Success)
	}
	g.askedFor, g.answer, g.answerSt = key, answer, st
	return answer, st
}

// scheduleFunc is the PodGroupSchedulingFunc the plugin gets: an ask, as upstream's assignments.
func (g *groupPreemption) scheduleFunc(context.Context) (*fwk.PodGroupAssignments, *fwk.Status) {
	answer, st := g.ask()
	if !st.IsSuccess() {
		return nil, fwk.NewStatus(fwk.Code(st.Code), st.Reasons...)
	}
	out := &fwk.PodGroupAssignments{Placement: &fwk.Placement{Name: answer.Placement}}
	byUID := map[types.UID]*v1.Pod{}
	for _, pod := range g.group.UnscheduledPods {
		byUID[pod.UID] = pod
	}
	for _, a := range answer.Proposed {
		pod := byUID[types.UID(a.Pod.GetMetadata().GetUid())]
		if pod == nil {
			continue
		}
		pi, err := framework.NewPodInfo(pod)
		if err != nil {
			return nil, fwk.AsStatus(err)
		}
		out.ProposedAssignments = append(out.ProposedAssignments,
			proposed{pod: pod, info: pi, node: a.NodeName, state: framework.NewCycleState()})
	}
	return out, nil
}

// filter answers RunFilterPluginsWithNominatedPods for a pod of the group on a node: does the group
// still place, that pod included, with the pods taken out now.
func (g *groupPreemption) filter(pod *v1.Pod, node string) *fwk.Status {
	answer, st := g.ask()
	if !st.IsSuccess() {
		return fwk.NewStatus(fwk.Unschedulable, st.Reasons...)
	}
	for _, a := range answer.Proposed {
		if types.UID(a.Pod.GetMetadata().GetUid()) == pod.UID && a.NodeName != "" {
			return nil
		}
	}
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("pod %s/%s is not placed with the pods taken out (node %s)",
		pod.Namespace, pod.Name, node))
}

// GetPodInPreBind is nil: pods in PreBind are the framework's (a PodGroupPostFilter's victims among
// them are the framework's to evict).
func (h *Handle) GetPodInPreBind(types.UID) fwk.PodInPreBind { return nil }

// EventRecorder discards: the framework records the events of what it does with a plugin's answers.
func (h *Handle) EventRecorder() events.EventRecorderLogger { return &events.FakeRecorder{} }

// PodGroupManager lists the snapshot's pod groups (the Lister's); its other methods are the
// framework's and fail the call that uses them.
func (h *Handle) PodGroupManager() fwk.PodGroupManager { return podGroupManager{Lister: h.lister} }

type podGroupManager struct {
	fwk.PodGroupManager
	*Lister
}

func (m podGroupManager) PodGroupStates() fwk.PodGroupStateLister { return m.Lister.PodGroupStates() }
func (m podGroupManager) PodGroups() fwk.PodGroupLister           { return m.Lister.PodGroups() }
func (m podGroupManager) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return m.Lister.CompositePodGroupStates()
}
func (m podGroupManager) CompositePodGroups() fwk.CompositePodGroupLister {
	return m.Lister.CompositePodGroups()
}

// ---- the mutable snapshot lister ---------------------------------------------------------------------

// mutableLister is the Handle's MutableSnapshotSharedLister: the Lister, with the call's mutations.
type mutableLister struct {
	*Lister
	h *Handle
}

// MutableSnapshotSharedLister is the snapshot lister a PodGroupPostFilter mutates.
func (h *Handle) MutableSnapshotSharedLister() fwk.MutableSnapshotSharedLister {
	return mutableLister{Lister: h.lister, h: h}
}

func (m mutableLister) call() (*groupPreemption, error) {
	g, _ := m.h.groupCall().(*groupPreemption)
	if g == nil {
		return nil, fmt.Errorf("the mutable snapshot is available in PodGroupPostFilter only")
	}
	return g, nil
}

// NodeInfos lists the mutated clones while mutations run, the snapshot's otherwise.
func (m mutableLister) NodeInfos() fwk.NodeInfoLister {
	if g, _ := m.call(); g != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.mutating {
			return mutatedNodes{g: g, base: nodeInfoLister{m.Lister}}
		}
	}
	return m.Lister.NodeInfos()
}

// StartMutations clones the snapshot's NodeInfos for the call.
func (m mutableLister) StartMutations() error {
	g, err := m.call()
	if err != nil {
		return err
	}
	all := listsOf(m.snapshot()).all
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mutating {
		return fmt.Errorf("mutations already started")
	}
	g.mutating, g.nodes, g.list = true, make(map[string]*framework.NodeInfo, len(all)), make([]fwk.NodeInfo, len(all))
	for i, ni := range all {
		c := ni.(*framework.NodeInfo).SnapshotConcrete()
		g.list[i] = c
		g.nodes[c.Node().Name] = c
	}
	return nil
}

// EndMutations drops the clones (the pods taken out stay known to the call: the victims are checked
// against them when it ends).
func (m mutableLister) EndMutations() error {
	g, err := m.call()
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.mutating {
		return fmt.Errorf("mutations were not started")
	}
	g.mutating, g.nodes, g.list = false, nil, nil
	return nil
}

// AddPod puts a pod on a node: a pod taken out back, or a pod of the group assumed there.
func (m mutableLister) AddPod(pi fwk.PodInfo, nodeName string) error {
	g, err := m.call()
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ni := g.nodes[nodeName]
	if !g.mutating || ni == nil {
		return fmt.Errorf("adding pod %s/%s: node %q is not in the mutated snapshot", pi.GetPod().Namespace, pi.GetPod().Name, nodeName)
	}
	ni.AddPodInfo(pi)
	uid := pi.GetPod().UID
	if _, ok := g.removed[uid]; ok {
		delete(g.removed, uid)
	} else {
		g.assumed[uid] = true
	}
	return nil
}

// RemovePod takes a pod off its node: a pod of the snapshot (the next ask goes without it), or a pod
// of the group assumed there.
func (m mutableLister) RemovePod(logger klog.Logger, pod *v1.Pod, nodeName string) error {
	g, err := m.call()
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ni := g.nodes[nodeName]
	if !g.mutating || ni == nil {
		return fmt.Errorf("removing pod %s/%s: node %q is not in the mutated snapshot", pod.Namespace, pod.Name, nodeName)
	}
	if err := ni.RemovePod(logger, pod); err != nil {
		return err
	}
	if g.assumed[pod.UID] {
		delete(g.assumed, pod.UID)
	} else {
		g.removed[pod.UID] = pod
	}
	return nil
}

type mutatedNodes struct {
	g    *groupPreemption
	base nodeInfoLister
}

func (n mutatedNodes) List() ([]fwk.NodeInfo, error) { return n.g.list, nil }

func (n mutatedNodes) Get(name string) (fwk.NodeInfo, error) {
	if ni := n.g.nodes[name]; ni != nil {
		return ni, nil
	}
	return nil, fmt.Errorf("nodeinfo not found for node name %q", name)
}

func (n mutatedNodes) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return n.base.HavePodsWithAffinityList()
}

func (n mutatedNodes) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return n.base.HavePodsWithRequiredAntiAffinityList()
}

func (n mutatedNodes) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	return n.base.HavePodsWithRequiredNonHostScopedAntiAffinityList()
}

// ---- the call -------------------------------------------------------------------------------------

// PodGroupPostFilter runs the plugin's PodGroupPostFilter for the group (see the top of this file):
// its nominations of the group's pods and the pods it deleted are the result.
func (p *Plugin) PodGroupPostFilter(c *outrigger.Call, g *outrigger.PodGroupInfo, schedule outrigger.PodGroupSchedulingFunc) (*outrigger.PodGroupPostFilterResult, *outrigger.Status) {
	pl, ok := p.p.(fwk.PodGroupPostFilterPlugin)
	if !ok || p.h == nil {
		return nil, outrigger.NewStatus(outrigger.Error, "the plugin does not implement PodGroupPostFilter")
	}
	defer p.publish(c)
	// One call at a time: the mutable snapshot and the recording client are the Handle's.
	p.h.groupMu.Lock()
	defer p.h.groupMu.Unlock()
	info := p.podGroupInfo(c, g)
	call := newGroupPreemption(info, schedule)
	p.h.group.Store(groupCallHolder{call})
	defer p.h.group.Store(groupCallHolder{})
	cyc := p.cycleOf(c)
	cyc.mu.Lock()
	result, st := pl.PodGroupPostFilter(c, cyc.state, info, call.scheduleFunc)
	cyc.mu.Unlock()
	return call.outcome(g, result, st)
}

// outcome is the call's result: an Error when an ask failed or a pod taken out was not deleted.
func (g *groupPreemption) outcome(group *outrigger.PodGroupInfo, result *fwk.PodGroupPostFilterResult, st *fwk.Status) (*outrigger.PodGroupPostFilterResult, *outrigger.Status) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return nil, outrigger.AsStatus(fmt.Errorf("PodGroupPostFilter could not be answered over the contract: %w", g.err))
	}
	if !st.IsSuccess() {
		return nil, statusOf(st)
	}
	out := &outrigger.PodGroupPostFilterResult{}
	deleted := map[types.UID]bool{}
	for _, pod := range g.deleted {
		deleted[pod.UID] = true
		out.Victims = append(out.Victims, outrigger.GroupVictim{Pod: podRef(pod), NodeName: pod.Spec.NodeName})
	}
	for _, pod := range g.removed {
		if !deleted[pod.UID] && pod.DeletionTimestamp == nil {
			return nil, outrigger.AsStatus(fmt.Errorf("PodGroupPostFilter took pod %s/%s out of the snapshot and did not "+
				"delete it within the call (asynchronous preemption: serve the plugin with SchedulerAsyncPreemption off)",
				pod.Namespace, pod.Name))
		}
	}
	sort.Slice(out.Victims, func(i, j int) bool { return victimKey(out.Victims[i]) < victimKey(out.Victims[j]) })
	if result != nil {
		for _, pod := range group.Pods {
			key := types.NamespacedName{Namespace: pod.GetMetadata().GetNamespace(), Name: pod.GetMetadata().GetName()}
			if n := result.NominatingInfos[key]; n != nil && n.NominatedNodeName != "" {
				out.Nominations = append(out.Nominations, outrigger.ProposedAssignment{Pod: pod, NodeName: n.NominatedNodeName})
			}
		}
	}
	return out, statusOf(st)
}

func victimKey(v outrigger.GroupVictim) string {
	return v.Pod.GetNamespace() + "/" + v.Pod.GetName()
}

func podRef(pod *v1.Pod) *pb.PodRef {
	return &pb.PodRef{Uid: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name}
}
