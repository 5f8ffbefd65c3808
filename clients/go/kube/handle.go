package kube

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"

	"outrigger.dev/clients/go/kube/internal/fwk"
	"outrigger.dev/clients/go/outrigger"
)

// Handle is kube-scheduler's framework.Handle for plugins served out of process: the snapshot lister
// reads the mirror, waiting pods are the framework's (Handle service), ClientSet and
// SharedInformerFactory reach the live apiserver when a kubeconfig is given (an informer factory
// that was never started, so its listers are empty, otherwise). What only an in-process framework
// can do (running other plugins, nominating pods) answers with nothing or an Error status; the
// methods this type does not define are the embedded interface's, which is nil: a plugin calling one
// fails that call with an Error status naming the panic, and the host keeps serving.
type Handle struct {
	fwk.Handle
	lister      *Lister
	profile     string
	client      clientset.Interface
	kubeconfig  *restclient.Config
	informers   informers.SharedInformerFactory
	parallelism int
	framework   func() *outrigger.Framework
	// group holds a groupCallHolder: the PodGroupPostFilter call in progress, if any (groupfilter.go);
	// groupMu runs those calls one at a time.
	group   atomic.Value
	groupMu sync.Mutex
}

// preemptCall is what a PodGroupPostFilter call in progress answers for the Handle (groupfilter.go).
type preemptCall interface {
	client() clientset.Interface
	filter(pod *v1.Pod, node string) *fwk.Status
}

type groupCallHolder struct{ c preemptCall }

// groupCall is the PodGroupPostFilter call in progress, or nil.
func (h *Handle) groupCall() preemptCall {
	v, _ := h.group.Load().(groupCallHolder)
	return v.c
}

// SnapshotSharedLister lists the mirror's NodeInfos as the current scheduling cycle sees them.
func (h *Handle) SnapshotSharedLister() fwk.SharedLister { return h.lister }

// ClientSet is the live apiserver's client (nil without a kubeconfig); during a PodGroupPostFilter
// call, a client that records the pods the plugin deletes and changes nothing (groupfilter.go).
func (h *Handle) ClientSet() clientset.Interface {
	if g := h.groupCall(); g != nil {
		return g.client()
	}
	return h.client
}

// KubeConfig is the kubeconfig's rest config (nil without one).
func (h *Handle) KubeConfig() *restclient.Config { return h.kubeconfig }

// SharedInformerFactory is the informer factory of the live apiserver (never started, so its listers
// are empty, without a kubeconfig).
func (h *Handle) SharedInformerFactory() informers.SharedInformerFactory { return h.informers }

// Parallelizer runs work pieces in parallel, as kube-scheduler's does.
func (h *Handle) Parallelizer() fwk.Parallelizer { return parallelize.NewParallelizer(h.parallelism) }

// ProfileName is the profile the plugin instance was configured for.
func (h *Handle) ProfileName() string { return h.profile }

// SharedCSIManager lists the CSINodes of the Handle's informer factory: the mirror's (fed from the
// snapshot mirror for plugins that declare NeedsVolumes), or the live apiserver's with a kubeconfig.
func (h *Handle) SharedCSIManager() fwk.CSIManager {
	return csiManager{csiNodes{h.informers.Storage().V1().CSINodes().Lister()}}
}

type csiManager struct{ nodes csiNodes }

func (m csiManager) CSINodes() fwk.CSINodeLister { return m.nodes }

type csiNodes struct{ l storagelisters.CSINodeLister }

func (c csiNodes) List() ([]*storagev1.CSINode, error) { return c.l.List(labels.Everything()) }

func (c csiNodes) Get(name string) (*storagev1.CSINode, error) { return c.l.Get(name) }

// APIDispatcher is nil (kube-scheduler's is nil without the SchedulerAsyncAPICalls feature).
func (h *Handle) APIDispatcher() fwk.APIDispatcher { return nil }

// APICacher is nil, like APIDispatcher.
func (h *Handle) APICacher() fwk.APICacher { return nil }

// Extenders are none.
func (h *Handle) Extenders() []fwk.Extender { return nil }

// NominatedPodsForNode is empty: nominations live in the framework.
func (h *Handle) NominatedPodsForNode(string) []fwk.PodInfo { return nil }

// AddNominatedPod does nothing (nominations live in the framework).
func (h *Handle) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}

// DeleteNominatedPodIfExists does nothing.
func (h *Handle) DeleteNominatedPodIfExists(*v1.Pod) {}

// UpdateNominatedPod does nothing.
func (h *Handle) UpdateNominatedPod(klog.Logger, *v1.Pod, fwk.PodInfo) {}

// Activate does nothing: the Handle has no way to the framework's queue. Pods a plugin puts in the
// cycle's PodsToActivate reach it (activate.go), and the framework requeues pods on cluster events.
func (h *Handle) Activate(klog.Logger, map[string]*v1.Pod) {}

func notHere(what string) *fwk.Status {
	return fwk.NewStatus(fwk.Error, what+" is not available to a plugin served out of process")
}

// RunFilterPluginsWithNominatedPods is not available out of process, but in a PodGroupPostFilter
// call for a pod of the group: whether the group still places it (groupfilter.go).
func (h *Handle) RunFilterPluginsWithNominatedPods(_ context.Context, _ fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if g := h.groupCall(); g != nil && ni != nil && ni.Node() != nil {
		return g.filter(pod, ni.Node().Name)
	}
	return notHere("RunFilterPluginsWithNominatedPods")
}

// RunFilterPlugins is not available out of process.
func (h *Handle) RunFilterPlugins(context.Context, fwk.CycleState, *v1.Pod, fwk.NodeInfo) *fwk.Status {
	return notHere("RunFilterPlugins")
}

// RunPreScorePlugins is not available out of process.
func (h *Handle) RunPreScorePlugins(context.Context, fwk.CycleState, *v1.Pod, []fwk.NodeInfo) *fwk.Status {
	return notHere("RunPreScorePlugins")
}

// RunScorePlugins is not available out of process.
func (h *Handle) RunScorePlugins(context.Context, fwk.CycleState, *v1.Pod, []fwk.NodeInfo) ([]fwk.NodePluginScores, *fwk.Status) {
	return nil, notHere("RunScorePlugins")
}

// RunPreFilterExtensionAddPod is not available out of process; in a PodGroupPostFilter call it has
// nothing to do (each ask is a fresh group cycle in the framework).
func (h *Handle) RunPreFilterExtensionAddPod(context.Context, fwk.CycleState, *v1.Pod, fwk.PodInfo, fwk.NodeInfo) *fwk.Status {
	if h.groupCall() != nil {
		return nil
	}
	return notHere("RunPreFilterExtensionAddPod")
}

// RunPreFilterExtensionRemovePod is RunPreFilterExtensionAddPod's counterpart.
func (h *Handle) RunPreFilterExtensionRemovePod(context.Context, fwk.CycleState, *v1.Pod, fwk.PodInfo, fwk.NodeInfo) *fwk.Status {
	if h.groupCall() != nil {
		return nil
	}
	return notHere("RunPreFilterExtensionRemovePod")
}

// RunReservePluginsReserve is not available out of process; in a PodGroupPostFilter call it has
// nothing to do, as RunPreFilterExtensionAddPod.
func (h *Handle) RunReservePluginsReserve(context.Context, fwk.CycleState, *v1.Pod, string) *fwk.Status {
	if h.groupCall() != nil {
		return nil
	}
	return notHere("RunReservePluginsReserve")
}

// RunReservePluginsUnreserve does nothing.
func (h *Handle) RunReservePluginsUnreserve(context.Context, fwk.CycleState, *v1.Pod, string) {}

// ---- namespaces: without an apiserver, every namespace a pod names exists -------------------------

type namespaceSeeder struct {
	seen sync.Map
	add  func(string)
}

var seeder atomic.Pointer[namespaceSeeder]

// seedNamespaces makes the (never started) informer factory's Namespace lister hold every namespace a
// converted pod names, labelled kubernetes.io/metadata.name as kube-apiserver labels every namespace,
// so namespaceSelectors on that label work without an apiserver.
func seedNamespaces(f informers.SharedInformerFactory) {
	indexer := f.Core().V1().Namespaces().Informer().GetIndexer()
	seeder.Store(&namespaceSeeder{add: func(ns string) {
		_ = indexer.Add(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{v1.LabelMetadataName: ns}}})
	}})
}

func seeNamespace(ns string) {
	if s := seeder.Load(); s != nil && ns != "" {
		if _, seen := s.seen.LoadOrStore(ns, true); !seen {
			s.add(ns)
		}
	}
}

// ---- waiting pods: the framework's, through its Handle service ---------------------------------------

const waitingPodsTimeout = 5 * time.Second

type waitingPod struct {
	fw  *outrigger.Framework
	pod *v1.Pod
	wp  []string
}

func (w *waitingPod) GetPod() *v1.Pod             { return w.pod }
func (w *waitingPod) GetPendingPlugins() []string { return w.wp }

func (w *waitingPod) Allow(plugin string) {
	ctx, cancel := context.WithTimeout(context.Background(), waitingPodsTimeout)
	defer cancel()
	if _, err := w.fw.AllowWaitingPod(ctx, string(w.pod.UID), plugin); err != nil {
		klog.ErrorS(err, "allowing a waiting pod", "pod", klog.KObj(w.pod), "plugin", plugin)
	}
}

// reject rejects the waiting pod through the framework: false when it was not waiting there (or the
// framework could not be reached). Reject is the release's signature over it (compat*.go).
func (w *waitingPod) reject(plugin, msg string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), waitingPodsTimeout)
	defer cancel()
	found, err := w.fw.RejectWaitingPod(ctx, string(w.pod.UID), plugin, msg)
	if err != nil {
		klog.ErrorS(err, "rejecting a waiting pod", "pod", klog.KObj(w.pod), "plugin", plugin)
	}
	return err == nil && found
}

func (h *Handle) waitingPods() []fwk.WaitingPod {
	fw := h.framework()
	if fw == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitingPodsTimeout)
	defer cancel()
	pods, err := fw.ListWaitingPods(ctx, h.profile)
	if err != nil {
		klog.ErrorS(err, "listing the waiting pods")
		return nil
	}
	out := make([]fwk.WaitingPod, len(pods))
	for i, p := range pods {
		out[i] = &waitingPod{fw: fw, pod: Pod(p.GetPod()), wp: p.GetPendingPlugins()}
	}
	return out
}

// IterateOverWaitingPods calls fn with every pod waiting in Permit (the framework's list).
func (h *Handle) IterateOverWaitingPods(fn func(fwk.WaitingPod)) {
	for _, w := range h.waitingPods() {
		fn(w)
	}
}

// GetWaitingPod is the waiting pod with uid, or nil (nil during a PodGroupPostFilter call: its
// victims are the framework's to evict, waiting or not).
func (h *Handle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	if h.groupCall() != nil {
		return nil
	}
	for _, w := range h.waitingPods() {
		if w.GetPod().UID == uid {
			return w
		}
	}
	return nil
}

// RejectWaitingPod rejects the waiting pod with uid; false when it was not waiting.
func (h *Handle) RejectWaitingPod(uid types.UID) bool {
	fw := h.framework()
	if fw == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitingPodsTimeout)
	defer cancel()
	found, err := fw.RejectWaitingPod(ctx, string(uid), "", "rejected by a plugin")
	return err == nil && found
}
