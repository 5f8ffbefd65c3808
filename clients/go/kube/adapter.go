// Package kube serves plugins written for kube-scheduler's own interfaces (k8s.io/kube-scheduler/
// framework) out of process, through the Outrigger Go SDK: a plugin's factory is registered exactly
// as in a custom kube-scheduler build (app.WithPlugin(name, New)), and the adapter maps every
// extension point the plugin implements to Outrigger's, with NodeInfos built from the snapshot
// mirror, a CycleState kept per cycle across the plugin's points, a Handle whose lister reads the
// mirror, and args decoded from the profile's pluginConfig. See docs/plugin-go.md.
package kube

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/kube/internal/fwk"
	"outrigger.dev/clients/go/outrigger"
)

// Option registers plugins, as kube-scheduler's app.Option does: app.WithPlugin(name, New) values
// are Options (the same function type), and so are this package's WithPlugin ones.
type Option = func(frameworkruntime.Registry) error

// WithPlugin registers a kube-scheduler plugin factory under name (app.WithPlugin without importing
// kube-scheduler's command package).
func WithPlugin(name string, factory frameworkruntime.PluginFactory) Option {
	return func(r frameworkruntime.Registry) error { return r.Register(name, factory) }
}

// Config configures the adapter.
type Config struct {
	// Prefix is put before every plugin's name as the framework sees it (e.g. "Upstream" serves
	// NodeResourcesFit as UpstreamNodeResourcesFit beside Outrigger's own in-tree plugin); args are
	// still decoded by the plugin's own name.
	Prefix string
	// Kubeconfig, when set, gives the Handle a ClientSet and a started SharedInformerFactory on that
	// apiserver.
	Kubeconfig string
	// Parallelism of the Handle's Parallelizer (default 16, kube-scheduler's).
	Parallelism int
	// Shared are the CycleState keys shared with the framework (and so with plugins in other
	// processes and languages): declared in every plugin's manifest, so their entries come with each
	// request and are written into the cycle's CycleState before the plugin runs; a value a plugin
	// writes (or deletes) under one of them rides back on the reply.
	Shared []SharedState
	// Volumes makes every plugin declare NeedsVolumes (the storage objects reach the host and the
	// Handle's PVC, PV, StorageClass and CSINode listers). Plugins named as kube-scheduler's volume
	// plugins (VolumeBinding, VolumeZone, NodeVolumeLimits, VolumeRestrictions) always do.
	Volumes bool
	// Devices makes every plugin declare NeedsDevices: the mirror's ResourceSlices, DeviceClasses and
	// ResourceClaims reach the host and the Handle's SharedDRAManager lists them (read-only: the
	// in-memory claim tracking of DynamicResources' Reserve and PreBind is the framework's).
	Devices bool
}

// volumePlugins are kube-scheduler's plugins that read storage objects through their listers.
var volumePlugins = map[string]bool{"VolumeBinding": true, "VolumeZone": true, "NodeVolumeLimits": true, "VolumeRestrictions": true}

// SharedState is a CycleState key shared with the framework, with how its values cross the wire.
type SharedState struct {
	Key         string
	ContentType string
	Decode      func([]byte) (fwk.StateData, error)
	Encode      func(fwk.StateData) ([]byte, error)
}

// JSONState shares key as JSON (application/json): values of type *T, which implements fwk.StateData.
func JSONState[T any, PT interface {
	*T
	fwk.StateData
}](key string) SharedState {
	return SharedState{
		Key: key, ContentType: outrigger.JSONContentType,
		Decode: func(b []byte) (fwk.StateData, error) {
			v := PT(new(T))
			if err := json.Unmarshal(b, v); err != nil {
				return nil, fmt.Errorf("cycle state %q: %w", key, err)
			}
			return v, nil
		},
		Encode: func(d fwk.StateData) ([]byte, error) { return json.Marshal(d) },
	}
}

// MaxCycles bounds the cycles whose CycleState the adapter keeps; CycleTTL is how long an unused
// cycle's state is kept. The framework does not tell hosts when a cycle ends, so states expire.
const (
	MaxCycles = 4096
	CycleTTL  = 60 * time.Second
)

// shared is what every adapted plugin of a host shares: the lister, the apiserver clients and the
// CycleStates of the cycles in flight (one per cycle, shared by the host's plugins as kube-scheduler's
// plugins of a profile share one).
type shared struct {
	lister      *Lister
	client      clientset.Interface
	kubeconfig  *restclient.Config
	informers   informers.SharedInformerFactory
	parallelism int
	startOnce   sync.Once
	keys        []SharedState
	// podsInformed says the Handle's pod informer runs (a plugin asked for it before start).
	podsInformed atomic.Bool
	// groupsOnce asks the informer factory for PodGroups once (watchPodGroups).
	groupsOnce sync.Once

	mu     sync.Mutex
	cycles map[string]*cycle
	fed    *outrigger.Mirror // the mirror whose storage objects the listers hold
}

// feedStorage makes the (never started) informer factory's PVC, PV, StorageClass and CSINode listers
// hold m's storage objects from now on (a live apiserver's informers feed themselves).
func (s *shared) feedStorage(m *outrigger.Mirror) {
	if m == nil || s.kubeconfig != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fed == m {
		return
	}
	s.fed = m
	m.FeedStorage(newStorageIndexers(s.informers).apply)
}

type cycle struct {
	mu    sync.Mutex
	state *framework.CycleState
	ran   map[string]bool // "PreFilter/<plugin>", "PreScore/<plugin>": points run for this cycle here
	used  time.Time
	seen  map[string]fwk.StateData // shared keys: the value last exchanged with the framework
	// activated are the pods of PodsToActivate already handed to the framework ("namespace/name").
	activated map[string]bool
}

func newShared(cfg Config) (*shared, error) {
	// kube-scheduler registers its metrics at start-up; plugins and the Parallelizer record to them.
	metrics.Register()
	s := &shared{lister: &Lister{}, parallelism: cfg.Parallelism, cycles: map[string]*cycle{}, keys: cfg.Shared}
	if s.parallelism <= 0 {
		s.parallelism = 16
	}
	if cfg.Kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
		s.kubeconfig = rc
		if s.client, err = clientset.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
	} else {
		// Never started: its listers are empty (plugins that take listers at construction still can).
		client, err := clientset.NewForConfig(&restclient.Config{Host: "http://127.0.0.1:1"})
		if err != nil {
			return nil, err
		}
		s.informers = informers.NewSharedInformerFactory(client, 0)
		seedNamespaces(s.informers)
		return s, nil
	}
	s.informers = informers.NewSharedInformerFactory(s.client, 0)
	return s, nil
}

// start starts the informers the plugins asked for (on the live apiserver only).
func (s *shared) start() {
	if s.kubeconfig == nil {
		return
	}
	s.startOnce.Do(func() {
		stop := make(chan struct{}) // runs for the life of the process
		s.informers.Start(stop)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		synced := s.informers.WaitForCacheSync(ctx.Done())
		s.podsInformed.Store(synced[reflect.TypeOf(&v1.Pod{})])
	})
}

// PodWait bounds how long a PreFilter call waits for the Handle's pod informer to hold its pod.
const PodWait = 2 * time.Second

// awaitPod waits, up to PodWait, until the Handle's pod informer holds pod (when it runs). kube-scheduler
// schedules the pods its own informer delivers, so its plugins' pod listers always hold the pod of the
// cycle and every pod created before it (Coscheduling counts a gang's pods there); the framework
// watches the apiserver on its own, and its request may overtake this host's watch.
func (s *shared) awaitPod(ctx context.Context, pod *v1.Pod) {
	if !s.podsInformed.Load() || pod.Name == "" {
		return
	}
	lister := s.informers.Core().V1().Pods().Lister().Pods(pod.Namespace)
	deadline := time.Now().Add(PodWait)
	for {
		got, err := lister.Get(pod.Name)
		if err == nil && (pod.UID == "" || got.UID == pod.UID) {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			klog.V(2).InfoS("the pod informer does not hold the pod yet; running PreFilter without it", "pod", klog.KObj(pod))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cycle is the CycleState of cycleID (a new one the first time).
func (s *shared) cycle(cycleID string) *cycle {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cycles[cycleID]
	if !ok {
		if len(s.cycles) >= MaxCycles {
			s.expire(now)
		}
		c = &cycle{state: newCycleState(), ran: map[string]bool{}, seen: map[string]fwk.StateData{},
			activated: map[string]bool{}}
		s.cycles[cycleID] = c
	}
	c.used = now
	return c
}

func (s *shared) expire(now time.Time) {
	for id, c := range s.cycles {
		if now.Sub(c.used) > CycleTTL {
			delete(s.cycles, id)
		}
	}
	if len(s.cycles) < MaxCycles {
		return
	}
	ids := make([]string, 0, len(s.cycles))
	for id := range s.cycles {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return s.cycles[ids[i]].used.Before(s.cycles[ids[j]].used) })
	for _, id := range ids[:len(ids)/2] {
		delete(s.cycles, id)
	}
}

// Registrations are the SDK registrations of the plugins opts register.
func Registrations(cfg Config, opts ...Option) ([]outrigger.Registration, error) {
	registry := frameworkruntime.Registry{}
	for _, opt := range opts {
		if err := opt(registry); err != nil {
			return nil, err
		}
	}
	sh, err := newShared(cfg)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	sort.Strings(names)
	var regs []outrigger.Registration
	for _, name := range names {
		a := &adapted{name: name, served: cfg.Prefix + name, factory: registry[name], shared: sh}
		probe, err := a.build(nil, &outrigger.Env{Framework: func() *outrigger.Framework { return nil }})
		if err != nil {
			return nil, fmt.Errorf("plugin %s: building it with its default args: %w", name, err)
		}
		p := probe.(*Plugin)
		points := p.points()
		if len(points) == 0 {
			return nil, fmt.Errorf("plugin %s implements no extension point Outrigger can call%s", name, unservedNote(p.Unserved()))
		}
		if unserved := p.Unserved(); len(unserved) > 0 {
			klog.InfoS("a plugin implements points not served out of process; its other points are served",
				"plugin", a.served, "unserved", unserved, "kubernetes", Release())
		}
		keys := make([]string, len(cfg.Shared))
		for i, k := range cfg.Shared {
			keys[i] = k.Key
		}
		regs = append(regs, outrigger.Registration{
			Name: a.served, Factory: a.build, Points: points, NeedsSnapshot: true, Events: p.events(), StateKeys: keys,
			NeedsVolumes: cfg.Volumes || volumePlugins[name], NeedsDevices: cfg.Devices,
		})
	}
	return regs, nil
}

// unservedNote says which of a plugin's points cannot be served, for the error of a plugin that has
// no other.
func unservedNote(unserved []string) string {
	if len(unserved) == 0 {
		return ""
	}
	return fmt.Sprintf(" (it implements %s, not served out of process: QueueSort's Less cannot be answered a key at a time, Sign only with a point it signs for)",
		strings.Join(unserved, ", "))
}

// Main serves the plugins opts register (e.g. app.WithPlugin(noderesources.Name, ...)) as an Outrigger
// plugin host: flags --listen, --framework, --version (outrigger.Main), --prefix and --kubeconfig
// (Config). It returns the process exit code.
func Main(what string, args []string, opts ...Option) int {
	return MainWith(what, Config{}, args, opts...)
}

// MainWith is Main with a Config (its Shared keys, Parallelism); the flags set Prefix and Kubeconfig.
// The host's version (Handshake, --version) names the Kubernetes release it was built against
// (Version).
func MainWith(what string, cfg Config, args []string, opts ...Option) int {
	fs := flag.NewFlagSet(what, flag.ContinueOnError)
	prefix := fs.String("prefix", cfg.Prefix, "put before every plugin's name as profiles reference it (e.g. Upstream)")
	kubeconfig := fs.String("kubeconfig", cfg.Kubeconfig, "the live apiserver the Handle's ClientSet and SharedInformerFactory use")
	return outrigger.MainVersion(what, Version(), fs, args, func() ([]outrigger.Registration, error) {
		cfg.Prefix, cfg.Kubeconfig = *prefix, *kubeconfig
		return Registrations(cfg, opts...)
	})
}

// adapted is one registered kube-scheduler plugin.
type adapted struct {
	name, served string
	factory      frameworkruntime.PluginFactory
	shared       *shared
}

func (a *adapted) build(args json.RawMessage, env *outrigger.Env) (outrigger.Plugin, error) {
	obj, err := DecodeArgs(a.name, args)
	if err != nil {
		return nil, err
	}
	h := &Handle{lister: a.shared.lister, profile: env.Profile, client: a.shared.client, kubeconfig: a.shared.kubeconfig,
		informers: a.shared.informers, parallelism: a.shared.parallelism, framework: env.Framework}
	p, err := a.factory(context.Background(), obj, h)
	if err != nil {
		return nil, err
	}
	if env.Profile != "" {
		a.shared.watchPodGroups(p)
		a.shared.start()
	}
	a.shared.feedStorage(env.Mirror)
	return &Plugin{served: a.served, p: p, shared: a.shared, h: h}, nil
}

// Plugin is a kube-scheduler plugin as the SDK serves it.
type Plugin struct {
	served string
	p      fwk.Plugin
	shared *shared
	h      *Handle
}

// Name is the name the framework knows the plugin by.
func (p *Plugin) Name() string { return p.served }

// Upstream is the kube-scheduler plugin served.
func (p *Plugin) Upstream() fwk.Plugin { return p.p }

// Unserved names the kube-scheduler points the plugin implements that the adapter does not serve, in
// this order: QueueSort, Sign (1.37's; only without PreFilter, Filter, PreScore or Score to sign
// for). The framework never calls them; the plugin's other
// points are served.
func (p *Plugin) Unserved() []string { return fwk.Unserved(p.p) }

func (p *Plugin) points() []pb.ExtensionPoint {
	var pts []pb.ExtensionPoint
	add := func(ok bool, pt pb.ExtensionPoint) {
		if ok {
			pts = append(pts, pt)
		}
	}
	_, ok := p.p.(fwk.PreEnqueuePlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_PRE_ENQUEUE)
	pf, ok := p.p.(fwk.PreFilterPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_PRE_FILTER)
	add(ok && pf.PreFilterExtensions() != nil, pb.ExtensionPoint_EXTENSION_POINT_PRE_FILTER_EXTENSIONS)
	_, ok = p.p.(fwk.FilterPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_FILTER)
	_, ok = p.p.(fwk.PostFilterPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_POST_FILTER)
	_, ok = p.p.(fwk.PreScorePlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_PRE_SCORE)
	sp, ok := p.p.(fwk.ScorePlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_SCORE)
	add(ok && sp.ScoreExtensions() != nil, pb.ExtensionPoint_EXTENSION_POINT_NORMALIZE_SCORE)
	_, ok = p.p.(fwk.ReservePlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_RESERVE)
	_, ok = p.p.(fwk.PermitPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_PERMIT)
	_, ok = p.p.(fwk.PreBindPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_PRE_BIND)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_PRE_BIND_PRE_FLIGHT)
	_, ok = p.p.(fwk.BindPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_BIND)
	_, ok = p.p.(fwk.PostBindPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_POST_BIND)
	_, ok = p.p.(fwk.EnqueueExtensions)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_ENQUEUE_EXTENSIONS)
	pts = append(pts, placementPoints(p.p)...)
	return append(pts, signPoints(p.p)...)
}

// ---- statuses and events ---------------------------------------------------------------------------

// statusOf is a kube-scheduler status as the SDK's (nil for success).
func statusOf(s *fwk.Status) *outrigger.Status {
	if s.IsSuccess() {
		return nil
	}
	return &outrigger.Status{Code: outrigger.Code(s.Code()), Reasons: s.Reasons()}
}

func actionNames(a fwk.ActionType) string {
	if name := a.String(); name != "" {
		return name
	}
	var names []string
	for bit := fwk.ActionType(1); bit <= fwk.All && bit > 0; bit <<= 1 {
		if a&bit != 0 {
			names = append(names, bit.String())
		}
	}
	return strings.Join(names, "|")
}

func (p *Plugin) registered() []fwk.ClusterEventWithHint {
	ee, ok := p.p.(fwk.EnqueueExtensions)
	if !ok {
		return nil
	}
	events, err := ee.EventsToRegister(context.Background())
	if err != nil {
		klog.ErrorS(err, "EventsToRegister", "plugin", p.p.Name())
		return nil
	}
	return events
}

func (p *Plugin) events() []*pb.ClusterEventWithHint {
	var out []*pb.ClusterEventWithHint
	for _, e := range p.registered() {
		out = append(out, &pb.ClusterEventWithHint{
			Event:           &pb.ClusterEvent{Resource: string(e.Event.Resource), Action: actionNames(e.Event.ActionType)},
			HasQueueingHint: e.QueueingHintFn != nil,
		})
	}
	return out
}

// EventsToRegister lists the plugin's cluster events.
func (p *Plugin) EventsToRegister() []*pb.ClusterEventWithHint { return p.events() }

// QueueingHint runs the plugin's QueueingHintFn for the event (Queue when it has none or fails).
func (p *Plugin) QueueingHint(c *outrigger.Call, pod *pb.Pod, event *pb.ClusterEvent, oldObject, newObject json.RawMessage) bool {
	decode := func(raw json.RawMessage) any {
		if len(raw) == 0 {
			return nil
		}
		var obj any
		switch {
		case strings.Contains(event.GetResource(), "Pod"):
			obj = &v1.Pod{}
		case event.GetResource() == "Node":
			obj = &v1.Node{}
		default:
			return nil
		}
		if json.Unmarshal(raw, obj) != nil {
			return nil
		}
		return obj
	}
	for _, e := range p.registered() {
		if string(e.Event.Resource) != event.GetResource() || e.QueueingHintFn == nil {
			continue
		}
		hint, err := e.QueueingHintFn(klog.FromContext(c), Pod(pod), decode(oldObject), decode(newObject))
		return err != nil || hint == fwk.Queue
	}
	return true
}

// ---- the scheduling cycle --------------------------------------------------------------------------

// bindingCycle are the points that run in the binding cycle, concurrently with the next scheduling
// cycle: their calls leave the lister on the scheduling cycle's snapshot (kube-scheduler's snapshot
// likewise holds until Permit).
var bindingCycle = map[string]bool{"Unreserve": true, "PreBindPreFlight": true, "PreBind": true, "Bind": true,
	"PostBind": true}

// cycleOf is the call's CycleState, with the shared keys' entries the request brought written into
// it; the call's snapshot becomes the lister's.
func (p *Plugin) cycleOf(c *outrigger.Call) *cycle {
	if c.Snapshot != nil && !bindingCycle[c.Point] {
		p.shared.lister.Set(c.Snapshot)
	}
	cyc := p.shared.cycle(c.CycleID)
	if len(p.shared.keys) > 0 && c.State != nil {
		cyc.mu.Lock()
		defer cyc.mu.Unlock()
		for _, k := range p.shared.keys {
			entry, ok := c.State.Get(k.Key)
			if !ok {
				continue
			}
			data, err := k.Decode(entry.GetValue())
			if err != nil {
				klog.ErrorS(err, "a shared CycleState entry the framework sent", "key", k.Key)
				continue
			}
			cyc.state.Write(fwk.StateKey(k.Key), data)
			cyc.seen[k.Key] = data
		}
	}
	return cyc
}

// publish puts on the call's reply the shared keys the plugin wrote or deleted during the call, and
// the pods it asked to activate.
func (p *Plugin) publish(c *outrigger.Call) {
	if c.State == nil || whatIf(c.View) {
		return
	}
	cyc := p.shared.cycle(c.CycleID)
	cyc.mu.Lock()
	defer cyc.mu.Unlock()
	publishActivations(c, cyc)
	for _, k := range p.shared.keys {
		data, err := cyc.state.Read(fwk.StateKey(k.Key))
		switch {
		case err != nil && cyc.seen[k.Key] != nil:
			c.State.Delete(k.Key)
			delete(cyc.seen, k.Key)
		case err == nil && data != cyc.seen[k.Key]:
			b, err := k.Encode(data)
			if err != nil {
				klog.ErrorS(err, "encoding a shared CycleState entry", "key", k.Key)
				continue
			}
			c.State.Set(k.Key, k.ContentType, b)
			cyc.seen[k.Key] = data
		}
	}
}

func nodeInfos(c *outrigger.Call) []fwk.NodeInfo {
	if c.Snapshot == nil {
		return nil
	}
	return listsOf(c.Snapshot).all
}

// PreEnqueue runs the plugin's PreEnqueue.
func (p *Plugin) PreEnqueue(c *outrigger.Call, pod *pb.Pod) *outrigger.Status {
	return statusOf(p.p.(fwk.PreEnqueuePlugin).PreEnqueue(c, Pod(pod)))
}

func (p *Plugin) preFilter(c *outrigger.Call, cyc *cycle, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status) {
	p.shared.awaitPod(c, pod)
	result, st := p.p.(fwk.PreFilterPlugin).PreFilter(c, cyc.state, pod, nodeInfos(c))
	cyc.ran["PreFilter/"+p.served] = true
	return result, st
}

// PreFilter runs the plugin's PreFilter (its node list: the cycle's snapshot).
func (p *Plugin) PreFilter(c *outrigger.Call, pod *pb.Pod) (*outrigger.PreFilterResult, *outrigger.Status) {
	defer p.publish(c)
	cyc := p.cycleOf(c)
	cyc.mu.Lock()
	defer cyc.mu.Unlock()
	result, st := p.preFilter(c, cyc, Pod(pod))
	if !st.IsSuccess() || result == nil || result.AllNodes() {
		return nil, statusOf(st)
	}
	return &outrigger.PreFilterResult{NodeNames: sets(result.NodeNames)}, nil
}

func sets[T interface{ UnsortedList() []string }](s T) []string {
	out := s.UnsortedList()
	sort.Strings(out)
	return out
}

// whatIf says the call sees pods or nodes the cycle's snapshot does not have (preemption's victims
// removed, nominated or hypothetical pods added, what-if nodes).
func whatIf(view *pb.NodeView) bool {
	return len(view.GetAddedPods())+len(view.GetRemovedPods())+len(view.GetAddedNodes()) > 0
}

// prepared is the cycle's CycleState with the plugin's PreFilter run, run here (from the request's
// pod and snapshot) when this host did not see it: PreFilter is deterministic, so another replica
// or a restarted host reaches the same state. A failing replay is the batch's status.
//
// A what-if call (preemption's "without these victims", nominated pods) gets a state of its own with
// PreFilter run on the what-if cluster: the same state kube-scheduler reaches by cloning the cycle's
// and applying PreFilterExtensions.AddPod/RemovePod (which exist to be equivalent to it). The
// framework sends what-ifs with the cycle's id, so they never touch the cycle's own state.
func (p *Plugin) prepared(c *outrigger.Call, pod *v1.Pod) (fwk.CycleState, *fwk.Status) {
	if whatIf(c.View) {
		if c.Snapshot != nil {
			p.shared.lister.Set(c.Snapshot)
		}
		state := framework.NewCycleState()
		if pf, ok := p.p.(fwk.PreFilterPlugin); ok {
			if _, st := pf.PreFilter(c, state, pod, nodeInfos(c)); !st.IsSuccess() && !st.IsSkip() {
				return nil, st
			}
		}
		return state, nil
	}
	cyc := p.cycleOf(c)
	cyc.mu.Lock()
	defer cyc.mu.Unlock()
	if _, ok := p.p.(fwk.PreFilterPlugin); ok && !cyc.ran["PreFilter/"+p.served] {
		if _, st := p.preFilter(c, cyc, pod); !st.IsSuccess() && !st.IsSkip() {
			return nil, st
		}
	}
	return cyc.state, nil
}

// PreFilterExtensions are the plugin's AddPod/RemovePod (nil without them).
func (p *Plugin) PreFilterExtensions() outrigger.PreFilterExtensions {
	if pf, ok := p.p.(fwk.PreFilterPlugin); ok && pf.PreFilterExtensions() != nil {
		return extensions{p, pf.PreFilterExtensions()}
	}
	return nil
}

// whatIfView marks a call as a what-if for prepared (a view whose content is never read).
var whatIfView = &pb.NodeView{RemovedPods: []*pb.RemovedPod{{}}}

type extensions struct {
	p   *Plugin
	ext fwk.PreFilterExtensions
}

// run answers AddPod/RemovePod. The framework follows them with the what-if's Filter calls, whose
// node view holds the same pods added or removed, and prepared builds those calls' state from the
// what-if cluster; so the cycle's own state is left alone and the plugin's extension runs on a state
// of its own (its status is still the answer: a plugin may refuse the change).
func (e extensions) run(c *outrigger.Call, pod, other *pb.Pod, node outrigger.Node, add bool) *outrigger.Status {
	v1pod := Pod(pod)
	c = &outrigger.Call{Context: c.Context, Point: c.Point, Plugin: c.Plugin, Profile: c.Profile, CycleID: c.CycleID,
		Attempt: c.Attempt, State: c.State, Snapshot: c.Snapshot, Framework: c.Framework, View: whatIfView}
	state, st := e.p.prepared(c, v1pod)
	if st != nil {
		return statusOf(st)
	}
	if node.State == nil {
		return outrigger.NewStatus(outrigger.Error, fmt.Sprintf("node %q is not in the snapshot", node.Name))
	}
	info, err := framework.NewPodInfo(Pod(other))
	if err != nil {
		return outrigger.AsStatus(err)
	}
	ni := NodeInfo(node.State)
	if add {
		return statusOf(e.ext.AddPod(c, state, v1pod, info, ni))
	}
	return statusOf(e.ext.RemovePod(c, state, v1pod, info, ni))
}

func (e extensions) AddPod(c *outrigger.Call, pod, other *pb.Pod, node outrigger.Node) *outrigger.Status {
	return e.run(c, pod, other, node, true)
}

func (e extensions) RemovePod(c *outrigger.Call, pod, other *pb.Pod, node outrigger.Node) *outrigger.Status {
	return e.run(c, pod, other, node, false)
}

// Filter runs the plugin's Filter on every node of the batch.
func (p *Plugin) Filter(c *outrigger.Call, pod *pb.Pod, nodes []outrigger.Node) []*outrigger.Status {
	defer p.publish(c)
	out := make([]*outrigger.Status, len(nodes))
	v1pod := Pod(pod)
	state, st := p.prepared(c, v1pod)
	fp := p.p.(fwk.FilterPlugin)
	for i, n := range nodes {
		if st != nil {
			out[i] = statusOf(st)
			continue
		}
		out[i] = statusOf(fp.Filter(c, state, v1pod, NodeInfo(n.State)))
	}
	return out
}

// PostFilter runs the plugin's PostFilter with the nodes' rejections.
func (p *Plugin) PostFilter(c *outrigger.Call, pod *pb.Pod, statuses map[string]*outrigger.Status) (string, *outrigger.Status) {
	defer p.publish(c)
	v1pod := Pod(pod)
	state, st := p.prepared(c, v1pod)
	if st != nil {
		return "", statusOf(st)
	}
	m := framework.NewDefaultNodeToStatus()
	for name, s := range statuses {
		fs := fwk.NewStatus(fwk.Code(s.Code), s.Reasons...)
		if name == "" {
			m.SetAbsentNodesStatus(fs)
		} else {
			m.Set(name, fs)
		}
	}
	result, st := p.p.(fwk.PostFilterPlugin).PostFilter(c, state, v1pod, m)
	nominated := ""
	if result != nil && result.NominatingInfo != nil {
		nominated = result.NominatedNodeName
	}
	return nominated, statusOf(st)
}

// PreScore runs the plugin's PreScore over the feasible nodes.
func (p *Plugin) PreScore(c *outrigger.Call, pod *pb.Pod, nodes []outrigger.Node) *outrigger.Status {
	defer p.publish(c)
	v1pod := Pod(pod)
	state, st := p.prepared(c, v1pod)
	if st != nil {
		return statusOf(st)
	}
	infos := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		infos[i] = NodeInfo(n.State)
	}
	st = p.p.(fwk.PreScorePlugin).PreScore(c, state, v1pod, infos)
	cyc := p.shared.cycle(c.CycleID)
	cyc.mu.Lock()
	cyc.ran["PreScore/"+p.served] = true
	cyc.mu.Unlock()
	return statusOf(st)
}

// Score runs the plugin's Score on every node of the batch; a failing node fails the batch.
func (p *Plugin) Score(c *outrigger.Call, pod *pb.Pod, nodes []outrigger.Node) ([]int64, error) {
	defer p.publish(c)
	v1pod := Pod(pod)
	state, st := p.prepared(c, v1pod)
	if st != nil {
		return nil, st.AsError()
	}
	if _, ok := p.p.(fwk.PreScorePlugin); ok {
		cyc := p.shared.cycle(c.CycleID)
		cyc.mu.Lock()
		ran := cyc.ran["PreScore/"+p.served]
		cyc.mu.Unlock()
		if !ran {
			return nil, fmt.Errorf("PreScore of cycle %s did not run in this host (serve kube-scheduler plugins with PreScore from one replica)", c.CycleID)
		}
	}
	sp := p.p.(fwk.ScorePlugin)
	out := make([]int64, len(nodes))
	for i, n := range nodes {
		score, st := sp.Score(c, state, v1pod, NodeInfo(n.State))
		if !st.IsSuccess() {
			return nil, fmt.Errorf("%s", st.Message())
		}
		out[i] = score
	}
	return out, nil
}

// NormalizeScore runs the plugin's ScoreExtensions.NormalizeScore.
func (p *Plugin) NormalizeScore(c *outrigger.Call, pod *pb.Pod, nodes []outrigger.Node, scores []int64) *outrigger.Status {
	defer p.publish(c)
	v1pod := Pod(pod)
	state, st := p.prepared(c, v1pod)
	if st != nil {
		return statusOf(st)
	}
	list := make(fwk.NodeScoreList, len(nodes))
	for i, n := range nodes {
		list[i] = fwk.NodeScore{Name: n.Name, Score: scores[i]}
	}
	st = p.p.(fwk.ScorePlugin).ScoreExtensions().NormalizeScore(c, state, v1pod, list)
	for i := range list {
		scores[i] = list[i].Score
	}
	return statusOf(st)
}

// ---- reserve, permit and the binding cycle ---------------------------------------------------------

func (p *Plugin) state(c *outrigger.Call) fwk.CycleState { return p.cycleOf(c).state }

// Reserve runs the plugin's Reserve.
func (p *Plugin) Reserve(c *outrigger.Call, pod *pb.Pod, node string) *outrigger.Status {
	defer p.publish(c)
	return statusOf(p.p.(fwk.ReservePlugin).Reserve(c, p.state(c), Pod(pod), node))
}

// Unreserve runs the plugin's Unreserve.
func (p *Plugin) Unreserve(c *outrigger.Call, pod *pb.Pod, node string) {
	defer p.publish(c)
	p.p.(fwk.ReservePlugin).Unreserve(c, p.state(c), Pod(pod), node)
}

// Permit runs the plugin's Permit.
func (p *Plugin) Permit(c *outrigger.Call, pod *pb.Pod, node string) (*outrigger.Status, time.Duration) {
	defer p.publish(c)
	st, timeout := p.p.(fwk.PermitPlugin).Permit(c, p.state(c), Pod(pod), node)
	return statusOf(st), timeout
}

// PreBindPreFlight runs the plugin's PreBindPreFlight (1.37's AllowParallel result is the framework's
// concern and not carried).
func (p *Plugin) PreBindPreFlight(c *outrigger.Call, pod *pb.Pod, node string) *outrigger.Status {
	defer p.publish(c)
	return statusOf(fwk.PreBindPreFlight(c, p.p.(fwk.PreBindPlugin), p.state(c), Pod(pod), node))
}

// PreBind runs the plugin's PreBind.
func (p *Plugin) PreBind(c *outrigger.Call, pod *pb.Pod, node string) *outrigger.Status {
	defer p.publish(c)
	return statusOf(p.p.(fwk.PreBindPlugin).PreBind(c, p.state(c), Pod(pod), node))
}

// Bind runs the plugin's Bind.
func (p *Plugin) Bind(c *outrigger.Call, pod *pb.Pod, node string) *outrigger.Status {
	defer p.publish(c)
	return statusOf(p.p.(fwk.BindPlugin).Bind(c, p.state(c), Pod(pod), node))
}

// PostBind runs the plugin's PostBind.
func (p *Plugin) PostBind(c *outrigger.Call, pod *pb.Pod, node string) {
	defer p.publish(c)
	p.p.(fwk.PostBindPlugin).PostBind(c, p.state(c), Pod(pod), node)
}
