package outrigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// HostVersion is the SDK's version, sent in HandshakeResponse.host_version.
const HostVersion = "0.1.0-go"

// HealthService is the health service name the host serves besides "".
const HealthService = "outrigger.v1.Plugin"

// MirrorWait bounds how long a call waits for the mirror to reach its generation (and never past the
// call's deadline).
const MirrorWait = 5 * time.Second

// Options configure a Host.
type Options struct {
	// Listen is the address to serve on ("127.0.0.1:0" picks a free port).
	Listen string
	// Framework fixes where the host reaches the framework's Handle and CycleState services; empty:
	// the address the framework sends in its Handshake.
	Framework string
	// Logger receives the host's messages (default: the standard logger).
	Logger *log.Logger
	// Version is sent as the Handshake's host_version (default: HostVersion). A host serving code
	// built against another project's release names it there too (the kube adapter: HostVersion and
	// the Kubernetes release, e.g. "0.1.0-go kubernetes/v1.37.2").
	Version string
}

type hosted struct {
	reg       Registration
	manifest  *pb.PluginManifest
	mu        sync.RWMutex
	instances map[string]Plugin // profile -> instance
	// profile -> the args the instance was built from, canonical JSON; dropped when a Stopper is stopped
	args map[string]string
}

// Host serves plugins to the framework: the Plugin service of proto/outrigger/v1/plugin.proto and the
// standard health service.
type Host struct {
	pb.UnimplementedPluginServer
	opts    Options
	log     *log.Logger
	plugins []*hosted
	byName  map[string]*hosted
	mirror  *Mirror
	follows bool // some plugin follows the mirror
	nodes   bool // every following plugin reads node objects only
	volumes bool // some plugin reads storage objects
	devices bool // some plugin reads device objects

	mu           sync.Mutex
	fw           *Framework
	stopFollower context.CancelFunc

	server *grpc.Server
	health *health.Server
	lis    net.Listener
}

// NewHost checks the registrations (a clear error naming what to fix) and builds a host for them.
func NewHost(regs []Registration, opts Options) (*Host, error) {
	if len(regs) == 0 {
		return nil, errors.New("a plugin host needs at least one plugin")
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:50081"
	}
	if opts.Version == "" {
		opts.Version = HostVersion
	}
	h := &Host{opts: opts, log: opts.Logger, byName: map[string]*hosted{}, mirror: NewMirror(0), nodes: true}
	if h.log == nil {
		h.log = log.Default()
	}
	for _, reg := range regs {
		if reg.Name == "" {
			return nil, errors.New("a plugin registration has no name")
		}
		if _, dup := h.byName[reg.Name]; dup {
			return nil, fmt.Errorf("two hosted plugins are named %s", reg.Name)
		}
		if reg.Factory == nil {
			return nil, fmt.Errorf("plugin %s has no factory", reg.Name)
		}
		m, err := manifestOf(reg)
		if err != nil {
			return nil, err
		}
		reg.NeedsSnapshot = reg.NeedsSnapshot || reg.NeedsVolumes || reg.NeedsDevices
		h.volumes = h.volumes || reg.NeedsVolumes
		h.devices = h.devices || reg.NeedsDevices
		hp := &hosted{reg: reg, manifest: m, instances: map[string]Plugin{}}
		h.plugins = append(h.plugins, hp)
		h.byName[reg.Name] = hp
		if reg.NeedsSnapshot || reg.Lookahead {
			h.follows = true
			h.nodes = h.nodes && (reg.NodesOnly || reg.Lookahead)
		}
	}
	if opts.Framework != "" {
		fw, err := Dial(opts.Framework)
		if err != nil {
			return nil, err
		}
		h.fw = fw
	}
	return h, nil
}

// pointsOf derives the extension points of a plugin instance from the interfaces it implements.
func pointsOf(p Plugin) []pb.ExtensionPoint {
	var pts []pb.ExtensionPoint
	add := func(ok bool, pt pb.ExtensionPoint) {
		if ok {
			pts = append(pts, pt)
		}
	}
	_, ok := p.(PreEnqueuePlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_PRE_ENQUEUE)
	_, ok = p.(QueueSortPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_QUEUE_SORT)
	_, ok = p.(PreFilterPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_PRE_FILTER)
	if ext, ok := p.(PreFilterExtensionsPlugin); ok {
		add(ext.PreFilterExtensions() != nil, pb.ExtensionPoint_EXTENSION_POINT_PRE_FILTER_EXTENSIONS)
	}
	_, ok = p.(FilterPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_FILTER)
	_, ok = p.(PostFilterPlugin)
	_, withResult := p.(PostFilterResultPlugin)
	add(ok || withResult, pb.ExtensionPoint_EXTENSION_POINT_POST_FILTER)
	_, ok = p.(PreScorePlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_PRE_SCORE)
	_, ok = p.(ScorePlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_SCORE)
	_, ok = p.(NormalizeScorePlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_NORMALIZE_SCORE)
	_, ok = p.(ReservePlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_RESERVE)
	_, ok = p.(PermitPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_PERMIT)
	_, ok = p.(PreBindPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_PRE_BIND)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_PRE_BIND_PRE_FLIGHT)
	_, ok = p.(BindPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_BIND)
	_, ok = p.(PostBindPlugin)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_POST_BIND)
	_, ok = p.(EnqueueExtensions)
	add(ok, pb.ExtensionPoint_EXTENSION_POINT_ENQUEUE_EXTENSIONS)
	pts = append(pts, podGroupPoints(p)...)
	return append(pts, signPoints(p)...)
}

func manifestOf(reg Registration) (*pb.PluginManifest, error) {
	points := reg.Points
	events := reg.Events
	if len(points) == 0 {
		probe, err := callFactory(reg.Factory, json.RawMessage("{}"), &Env{Framework: func() *Framework { return nil }, Mirror: NewMirror(1)})
		if err != nil {
			return nil, fmt.Errorf("plugin %s: building an instance with no args to learn its extension points: %w "+
				"(or list them in Registration.Points)", reg.Name, err)
		}
		points = pointsOf(probe)
		if ee, ok := probe.(EnqueueExtensions); ok && events == nil {
			events = ee.EventsToRegister()
		}
	}
	if len(points) == 0 {
		return nil, fmt.Errorf("plugin %s implements no extension point", reg.Name)
	}
	has := map[pb.ExtensionPoint]bool{}
	for _, p := range points {
		has[p] = true
	}
	if reg.FilterAndScore && !(has[pb.ExtensionPoint_EXTENSION_POINT_FILTER] && has[pb.ExtensionPoint_EXTENSION_POINT_SCORE]) {
		return nil, fmt.Errorf("plugin %s: FilterAndScore needs both Filter and Score", reg.Name)
	}
	if has[pb.ExtensionPoint_EXTENSION_POINT_NORMALIZE_SCORE] && !has[pb.ExtensionPoint_EXTENSION_POINT_SCORE] {
		return nil, fmt.Errorf("plugin %s: NormalizeScore needs Score", reg.Name)
	}
	if has[pb.ExtensionPoint_EXTENSION_POINT_SIGN] && !signsFor(points) {
		return nil, fmt.Errorf("plugin %s: Sign needs PreFilter, Filter, PreScore or Score (the points it signs for)", reg.Name)
	}
	for _, k := range reg.StateKeys {
		if k == "" {
			return nil, fmt.Errorf("plugin %s: a state key is empty", reg.Name)
		}
	}
	if reg.NeedsVolumes && (reg.NodesOnly || reg.Lookahead) {
		return nil, fmt.Errorf("plugin %s: NeedsVolumes excludes NodesOnly and Lookahead (a storage change alters "+
			"answers without a node change)", reg.Name)
	}
	if reg.NeedsDevices && (reg.NodesOnly || reg.Lookahead) {
		return nil, fmt.Errorf("plugin %s: NeedsDevices excludes NodesOnly and Lookahead (a device change alters "+
			"answers without a node change)", reg.Name)
	}
	if reg.Lookahead {
		switch {
		case len(reg.StateKeys) > 0:
			return nil, fmt.Errorf("plugin %s: Lookahead answers read no CycleState, so no StateKeys", reg.Name)
		case has[pb.ExtensionPoint_EXTENSION_POINT_PRE_FILTER] || has[pb.ExtensionPoint_EXTENSION_POINT_PRE_SCORE]:
			return nil, fmt.Errorf("plugin %s: Lookahead answers run without PreFilter and PreScore", reg.Name)
		case !has[pb.ExtensionPoint_EXTENSION_POINT_FILTER] && !has[pb.ExtensionPoint_EXTENSION_POINT_SCORE]:
			return nil, fmt.Errorf("plugin %s: Lookahead needs Filter or Score", reg.Name)
		}
	}
	return &pb.PluginManifest{
		Name: reg.Name, Points: points, StateKeys: reg.StateKeys, PreferredBatchSize: reg.BatchSize,
		FilterAndScore: reg.FilterAndScore,
		NeedsSnapshot:  reg.NeedsSnapshot || reg.Lookahead || reg.NeedsVolumes || reg.NeedsDevices,
		NodesOnly:      reg.NodesOnly || reg.Lookahead, Lookahead: reg.Lookahead, Events: events,
		NeedsVolumes: reg.NeedsVolumes, NeedsDevices: reg.NeedsDevices,
	}, nil
}

// Mirror is the host's snapshot mirror (empty unless a plugin follows it).
func (h *Host) Mirror() *Mirror { return h.mirror }

// Start binds the listen address and serves in the background; it returns the bound address.
func (h *Host) Start() (string, error) {
	lis, err := net.Listen("tcp", h.opts.Listen)
	if err != nil {
		return "", fmt.Errorf("cannot listen on %s: %w", h.opts.Listen, err)
	}
	h.lis = lis
	h.server = grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes))
	pb.RegisterPluginServer(h.server, h)
	h.health = health.NewServer()
	healthpb.RegisterHealthServer(h.server, h.health)
	h.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.health.SetServingStatus(HealthService, healthpb.HealthCheckResponse_SERVING)
	go func() {
		if err := h.server.Serve(lis); err != nil {
			h.log.Printf("plugin host stopped serving: %v", err)
		}
	}()
	return lis.Addr().String(), nil
}

// Shutdown stops gracefully: health NOT_SERVING, then calls in flight get grace before being cut; the
// plugins are told to stop. Idempotent.
func (h *Host) Shutdown(grace time.Duration) {
	h.mu.Lock()
	server := h.server
	h.server = nil
	h.mu.Unlock()
	if server == nil {
		return
	}
	h.health.Shutdown()
	done := make(chan struct{})
	go func() {
		server.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		server.Stop()
	}
	h.stopInstances("", "the plugin host is stopping")
	h.mu.Lock()
	if h.stopFollower != nil {
		h.stopFollower()
		h.stopFollower = nil
	}
	if h.fw != nil {
		_ = h.fw.Close()
		h.fw = nil
	}
	h.mu.Unlock()
}

func (h *Host) stopInstances(profile, reason string) {
	for _, hp := range h.plugins {
		stopping := map[string]Stopper{}
		hp.mu.Lock()
		for p, inst := range hp.instances {
			if s, ok := inst.(Stopper); ok && (profile == "" || p == profile) {
				delete(hp.args, p) // configured again, it is built again
				stopping[p] = s
			}
		}
		hp.mu.Unlock()
		for p, s := range stopping {
			func() {
				defer func() {
					if r := recover(); r != nil {
						h.log.Printf("stopping plugin %s for profile %q panicked: %v", hp.reg.Name, p, r)
					}
				}()
				s.Stop(reason)
			}()
		}
	}
}

// Framework is the current client of the framework's services (nil before a handshake named one).
func (h *Host) Framework() *Framework { return h.framework() }

func (h *Host) framework() *Framework {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fw
}

// ---- Handshake and Configure ----------------------------------------------------------------------

// Handshake lists the plugins; a new framework address gets a new client (and a resynced mirror).
func (h *Host) Handshake(_ context.Context, req *pb.HandshakeRequest) (*pb.HandshakeResponse, error) {
	h.mu.Lock()
	if h.opts.Framework == "" && req.GetFrameworkAddress() != "" && (h.fw == nil || h.fw.Address != req.GetFrameworkAddress()) {
		if h.fw != nil {
			_ = h.fw.Close()
		}
		if h.stopFollower != nil {
			h.stopFollower()
			h.stopFollower = nil
		}
		fw, err := Dial(req.GetFrameworkAddress())
		if err != nil {
			h.mu.Unlock()
			return nil, grpcstatus.Error(codes.InvalidArgument, err.Error())
		}
		h.fw = fw
		h.mirror.Reset()
	}
	if h.fw != nil {
		h.fw.SetCredential(req.GetCredential())
		if h.follows && h.stopFollower == nil {
			ctx, cancel := context.WithCancel(context.Background())
			h.stopFollower = cancel
			go h.follow(ctx, h.fw)
		}
	}
	h.mu.Unlock()
	out := &pb.HandshakeResponse{HostVersion: h.opts.Version, Features: []string{"start-batch"}}
	for _, hp := range h.plugins {
		out.Plugins = append(out.Plugins, hp.manifest)
	}
	return out, nil
}

// follow keeps the mirror following the framework's cache until ctx ends, reconnecting with backoff.
func (h *Host) follow(ctx context.Context, fw *Framework) {
	backoff := 100 * time.Millisecond
	failing := false
	for ctx.Err() == nil {
		stream, err := fw.Handle.FollowSnapshot(ctx, &pb.FollowRequest{
			FromGeneration: h.mirror.Generation(), Plugin: h.plugins[0].reg.Name, NodesOnly: h.nodes,
			Volumes: h.volumes, Devices: h.devices,
		})
		for err == nil {
			var d *pb.SnapshotDelta
			if d, err = stream.Recv(); err == nil {
				h.mirror.Apply(d)
				backoff, failing = 100*time.Millisecond, false
			}
		}
		if ctx.Err() != nil {
			return
		}
		if !failing {
			h.log.Printf("following the snapshot at %s: %v (retrying)", fw.Address, err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func callFactory(f Factory, args json.RawMessage, env *Env) (p Plugin, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f(args, env)
}

// Configure builds the plugin's instance for a profile from its pluginConfig args.
func (h *Host) Configure(_ context.Context, req *pb.ConfigureRequest) (*pb.ConfigureReply, error) {
	hp, ok := h.byName[req.GetPlugin()]
	if !ok {
		return &pb.ConfigureReply{Status: errorStatus(h.unknown(req.GetPlugin()))}, nil
	}
	args := json.RawMessage(strings.TrimSpace(req.GetArgsJson()))
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return &pb.ConfigureReply{Status: errorStatus(fmt.Sprintf("invalid args for plugin %s: not a JSON object: %s", hp.reg.Name, args))}, nil
	}
	canonical := canonicalJSON(args)
	hp.mu.RLock()
	_, built := hp.instances[req.GetProfile()]
	same := built && hp.args[req.GetProfile()] == canonical
	hp.mu.RUnlock()
	if same {
		// The framework configures again after any failed call, as it cannot tell a slow host from a
		// restarted one: the same args keep the instance and its state.
		return &pb.ConfigureReply{Status: &pb.Status{}}, nil
	}
	inst, err := callFactory(hp.reg.Factory, args, &Env{Profile: req.GetProfile(), Framework: h.framework, Mirror: h.mirror})
	if err != nil {
		h.log.Printf("configuring plugin %s for profile %q failed: %v", hp.reg.Name, req.GetProfile(), err)
		return &pb.ConfigureReply{Status: errorStatus(err.Error())}, nil
	}
	hp.mu.Lock()
	old := hp.instances[req.GetProfile()]
	_, live := hp.args[req.GetProfile()] // not stopped already
	hp.instances[req.GetProfile()] = inst
	if hp.args == nil {
		hp.args = map[string]string{}
	}
	hp.args[req.GetProfile()] = canonical
	hp.mu.Unlock()
	if s, ok := old.(Stopper); ok && live && old != inst {
		s.Stop("configured again")
	}
	return &pb.ConfigureReply{Status: &pb.Status{}}, nil
}

// canonicalJSON is args re-encoded with sorted keys and no spacing, so equal args compare equal.
func canonicalJSON(args json.RawMessage) string {
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return string(args)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return string(args)
	}
	return string(out)
}

func errorStatus(reason string) *pb.Status {
	return &pb.Status{Code: pb.Code_CODE_ERROR, Reasons: []string{reason}}
}

func (h *Host) unknown(plugin string) string {
	names := make([]string, 0, len(h.plugins))
	for _, hp := range h.plugins {
		names = append(names, hp.reg.Name)
	}
	sort.Strings(names)
	return fmt.Sprintf("this host serves no plugin named %q (it serves %s)", plugin, strings.Join(names, ", "))
}

// instance is the plugin's instance for profile; a gRPC error the framework understands otherwise
// (FAILED_PRECONDITION: configure it, then retry).
func (h *Host) instance(plugin, profile string) (*hosted, Plugin, error) {
	hp, ok := h.byName[plugin]
	if !ok {
		return nil, nil, grpcstatus.Error(codes.NotFound, h.unknown(plugin))
	}
	hp.mu.RLock()
	inst, ok := hp.instances[profile]
	hp.mu.RUnlock()
	if !ok {
		return nil, nil, grpcstatus.Errorf(codes.FailedPrecondition, "plugin %s is not configured for profile %q", plugin, profile)
	}
	return hp, inst, nil
}

// ---- cycle-scoped calls -----------------------------------------------------------------------------

// waitBudget is how long a call may wait for the mirror: MirrorWait, and never past its deadline.
func waitBudget(ctx context.Context) time.Duration {
	budget := MirrorWait
	if d, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(d))
	}
	return max(budget, time.Millisecond)
}

// snapshotFor is the snapshot a cycle runs against, with its node view applied.
func (h *Host) snapshotFor(ctx context.Context, hp *hosted, c *pb.CycleContext, generation uint64) (*Snapshot, error) {
	if !hp.reg.NeedsSnapshot {
		return nil, nil
	}
	if generation == 0 {
		generation = c.GetSnapshotGeneration()
	}
	var snap *Snapshot
	var err error
	if h.nodes && c.GetNodeGeneration() > 0 {
		snap, err = h.mirror.WithNodesOf(ctx, c.GetNodeGeneration(), generation, waitBudget(ctx))
	} else {
		snap, err = h.mirror.WaitFor(ctx, generation, waitBudget(ctx))
	}
	if err != nil {
		return nil, err
	}
	return snap.WithView(c.GetNodeView()), nil
}

// bindingPoints run after the scheduling cycle (Reserve is its last point, then the binding cycle).
var bindingPoints = map[string]bool{"Reserve": true, "Unreserve": true, "Permit": true, "PreBindPreFlight": true,
	"PreBind": true, "Bind": true, "PostBind": true}

// call prepares a cycle-scoped call: the instance, the CycleState, the snapshot, the span.
func (h *Host) call(ctx context.Context, point string, c *pb.CycleContext) (*hosted, Plugin, *Call, trace.Span, error) {
	hp, inst, err := h.instance(c.GetPlugin(), c.GetProfile())
	if err != nil {
		return nil, nil, nil, nil, err
	}
	fw := h.framework()
	ctx, span := startSpan(ctx, point, c.GetTraceContext(), cycleAttrs(hp.reg.Name, c)...)
	call := &Call{Context: ctx, Point: point, Plugin: hp.reg.Name, Profile: c.GetProfile(), CycleID: c.GetCycleId(),
		Attempt: c.GetAttempt(), State: newCycleState(c, fw), Framework: fw, View: c.GetNodeView()}
	snap, err := h.snapshotFor(ctx, hp, c, 0)
	if err != nil && bindingPoints[point] && h.mirror.Generation() >= c.GetSnapshotGeneration() {
		// The binding cycle may run long after its scheduling cycle: a generation the mirror no longer
		// holds falls back to the latest (as kube-scheduler's plugins read the cache then, not the
		// cycle's snapshot).
		snap, err = h.mirror.Latest().WithView(c.GetNodeView()), nil
	}
	if err != nil {
		span.End()
		return hp, inst, call, nil, err
	}
	call.Snapshot = snap
	return hp, inst, call, span, nil
}

// guard runs fn, turning a panic into an Error status (the host keeps serving).
func guard(what string, fn func() *Status) (st *Status) {
	defer func() {
		if r := recover(); r != nil {
			log.Printf("%s panicked: %v\n%s", what, r, debug.Stack())
			st = &Status{Code: Error, Reasons: []string{fmt.Sprintf("%s panicked: %v", what, r)}}
		}
	}()
	return fn()
}

func endSpan(span trace.Span, st *Status) {
	if span == nil {
		return
	}
	if st != nil {
		span.SetAttributes(attribute.String("outrigger.code", st.Code.String()))
	}
	span.End()
}

// unary runs a cycle-scoped unary point: fn gets the call and returns the status.
func (h *Host) unary(ctx context.Context, point string, c *pb.CycleContext, fn func(inst Plugin, call *Call) *Status) (*Status, *Call, error) {
	hp, inst, call, span, err := h.call(ctx, point, c)
	if err != nil {
		var me *MirrorError
		if errors.As(err, &me) {
			return AsStatus(err), call, nil
		}
		return nil, nil, err
	}
	st := guard(fmt.Sprintf("%s of plugin %s", point, hp.reg.Name), func() *Status { return fn(inst, call) })
	endSpan(span, st)
	return st, call, nil
}

func writes(call *Call) []*pb.StateEntry {
	if call == nil || call.State == nil {
		return nil
	}
	return call.State.drain()
}

func missing(point string) *Status {
	return &Status{Code: Error, Reasons: []string{fmt.Sprintf("the plugin does not implement %s", point)}}
}

// PreFilter runs the plugin's PreFilter.
func (h *Host) PreFilter(ctx context.Context, req *pb.CycleRequest) (*pb.PreFilterReply, error) {
	var result *PreFilterResult
	st, call, err := h.unary(ctx, "PreFilter", req.GetCtx(), func(inst Plugin, call *Call) *Status {
		p, ok := inst.(PreFilterPlugin)
		if !ok {
			return missing("PreFilter")
		}
		var st *Status
		result, st = p.PreFilter(call, req.GetCtx().GetPod())
		return st
	})
	if err != nil {
		return nil, err
	}
	reply := &pb.PreFilterReply{Status: st.ToProto(), StateWrites: writes(call)}
	if result != nil && st.IsSuccess() {
		reply.Narrowed = true
		reply.NodeNames = result.NodeNames
	}
	return reply, nil
}

func (h *Host) extension(ctx context.Context, point string, req *pb.PreFilterExtensionRequest, add bool) (*pb.StatusReply, error) {
	st, call, err := h.unary(ctx, point, req.GetCtx(), func(inst Plugin, call *Call) *Status {
		p, ok := inst.(PreFilterExtensionsPlugin)
		var ext PreFilterExtensions
		if ok {
			ext = p.PreFilterExtensions()
		}
		if ext == nil {
			return missing("PreFilterExtensions")
		}
		node := Node{ID: req.GetNodeId(), Name: req.GetNodeName()}
		if call.Snapshot != nil {
			node.State = call.Snapshot.NodeByName(req.GetNodeName())
		}
		if add {
			return ext.AddPod(call, req.GetCtx().GetPod(), req.GetOtherPod(), node)
		}
		return ext.RemovePod(call, req.GetCtx().GetPod(), req.GetOtherPod(), node)
	})
	if err != nil {
		return nil, err
	}
	return &pb.StatusReply{Status: st.ToProto(), StateWrites: writes(call)}, nil
}

// PreFilterAddPod runs PreFilterExtensions.AddPod.
func (h *Host) PreFilterAddPod(ctx context.Context, req *pb.PreFilterExtensionRequest) (*pb.StatusReply, error) {
	return h.extension(ctx, "PreFilterAddPod", req, true)
}

// PreFilterRemovePod runs PreFilterExtensions.RemovePod.
func (h *Host) PreFilterRemovePod(ctx context.Context, req *pb.PreFilterExtensionRequest) (*pb.StatusReply, error) {
	return h.extension(ctx, "PreFilterRemovePod", req, false)
}

// PostFilter runs the plugin's PostFilter (PostFilterResult when it has it).
func (h *Host) PostFilter(ctx context.Context, req *pb.PostFilterRequest) (*pb.PostFilterReply, error) {
	var result *PostFilterResult
	st, call, err := h.unary(ctx, "PostFilter", req.GetCtx(), func(inst Plugin, call *Call) *Status {
		statuses := make(map[string]*Status, len(req.GetNodeStatuses()))
		for name, s := range req.GetNodeStatuses() {
			statuses[name] = StatusFromProto(s)
		}
		var st *Status
		switch p := inst.(type) {
		case PostFilterResultPlugin:
			result, st = p.PostFilterResult(call, req.GetCtx().GetPod(), statuses)
		case PostFilterPlugin:
			var nominated string
			if nominated, st = p.PostFilter(call, req.GetCtx().GetPod(), statuses); nominated != "" {
				result = &PostFilterResult{NominatedNodeName: nominated}
			}
		default:
			return missing("PostFilter")
		}
		return st
	})
	if err != nil {
		return nil, err
	}
	return postFilterReply(st, result, writes(call)), nil
}

// postFilterReply says what the PostFilter answer does to the pod's nomination: a result overrides it
// with its node ("" clearing it), no result leaves it (or a failed call: result is nil then).
func postFilterReply(st *Status, result *PostFilterResult, stateWrites []*pb.StateEntry) *pb.PostFilterReply {
	reply := &pb.PostFilterReply{Status: st.ToProto(), StateWrites: stateWrites,
		NominatingMode: pb.NominatingMode_NOMINATING_MODE_NOOP}
	if result != nil {
		reply.NominatingMode = pb.NominatingMode_NOMINATING_MODE_OVERRIDE
		reply.NominatedNodeName = result.NominatedNodeName
	}
	return reply
}

// nodesOf resolves a request's node ids (and names) against the call's snapshot.
func nodesOf(call *Call, ids []uint32, names []string) ([]Node, error) {
	nodes := make([]Node, len(ids))
	if call.Snapshot != nil {
		for i, id := range ids {
			st := call.Snapshot.Node(id)
			if st == nil {
				return nil, fmt.Errorf("node id %d is not in the snapshot of generation %d", id, call.Snapshot.Generation)
			}
			nodes[i] = Node{ID: id, Name: st.Name(), State: st}
		}
		return nodes, nil
	}
	if len(names) != len(ids) {
		return nil, fmt.Errorf("the request carries %d node ids but %d node names (this plugin does not follow the mirror: it needs names)",
			len(ids), len(names))
	}
	for i, id := range ids {
		nodes[i] = Node{ID: id, Name: names[i]}
	}
	return nodes, nil
}

// PreScore runs the plugin's PreScore over the feasible nodes.
func (h *Host) PreScore(ctx context.Context, req *pb.PreScoreRequest) (*pb.StatusReply, error) {
	st, call, err := h.unary(ctx, "PreScore", req.GetCtx(), func(inst Plugin, call *Call) *Status {
		p, ok := inst.(PreScorePlugin)
		if !ok {
			return missing("PreScore")
		}
		nodes, err := nodesOf(call, req.GetFeasibleNodeIds(), req.GetFeasibleNodeNames())
		if err != nil {
			return AsStatus(err)
		}
		return p.PreScore(call, req.GetCtx().GetPod(), nodes)
	})
	if err != nil {
		return nil, err
	}
	return &pb.StatusReply{Status: st.ToProto(), StateWrites: writes(call)}, nil
}

// NormalizeScore runs the plugin's NormalizeScore over every raw score of the cycle.
func (h *Host) NormalizeScore(ctx context.Context, req *pb.NormalizeScoreRequest) (*pb.NormalizeScoreReply, error) {
	scores := append([]int64(nil), req.GetScores()...)
	st, call, err := h.unary(ctx, "NormalizeScore", req.GetCtx(), func(inst Plugin, call *Call) *Status {
		p, ok := inst.(NormalizeScorePlugin)
		if !ok {
			return missing("NormalizeScore")
		}
		nodes, err := nodesOf(call, req.GetNodeIds(), req.GetNodeNames())
		if err != nil {
			return AsStatus(err)
		}
		if len(scores) != len(nodes) {
			return AsStatus(fmt.Errorf("the request carries %d scores for %d nodes", len(scores), len(nodes)))
		}
		return p.NormalizeScore(call, req.GetCtx().GetPod(), nodes, scores)
	})
	if err != nil {
		return nil, err
	}
	return &pb.NormalizeScoreReply{Status: st.ToProto(), Scores: scores, StateWrites: writes(call)}, nil
}

func (h *Host) node(ctx context.Context, point string, req *pb.NodeRequest, fn func(inst Plugin, call *Call, pod *pb.Pod, node string) *Status) (*pb.StatusReply, error) {
	st, call, err := h.unary(ctx, point, req.GetCtx(), func(inst Plugin, call *Call) *Status {
		return fn(inst, call, req.GetCtx().GetPod(), req.GetNodeName())
	})
	if err != nil {
		return nil, err
	}
	return &pb.StatusReply{Status: st.ToProto(), StateWrites: writes(call)}, nil
}

// Reserve runs the plugin's Reserve.
func (h *Host) Reserve(ctx context.Context, req *pb.NodeRequest) (*pb.StatusReply, error) {
	return h.node(ctx, "Reserve", req, func(inst Plugin, call *Call, pod *pb.Pod, node string) *Status {
		if p, ok := inst.(ReservePlugin); ok {
			return p.Reserve(call, pod, node)
		}
		return missing("Reserve")
	})
}

// Unreserve runs the plugin's Unreserve (informational: always Ack).
func (h *Host) Unreserve(ctx context.Context, req *pb.NodeRequest) (*pb.Ack, error) {
	_, err := h.node(ctx, "Unreserve", req, func(inst Plugin, call *Call, pod *pb.Pod, node string) *Status {
		if p, ok := inst.(ReservePlugin); ok {
			p.Unreserve(call, pod, node)
		}
		return nil
	})
	if err != nil {
		h.log.Printf("Unreserve of plugin %s: %v", req.GetCtx().GetPlugin(), err)
	}
	return &pb.Ack{}, nil
}

// Permit runs the plugin's Permit.
func (h *Host) Permit(ctx context.Context, req *pb.NodeRequest) (*pb.PermitReply, error) {
	var timeout time.Duration
	reply, err := h.node(ctx, "Permit", req, func(inst Plugin, call *Call, pod *pb.Pod, node string) *Status {
		p, ok := inst.(PermitPlugin)
		if !ok {
			return missing("Permit")
		}
		var st *Status
		st, timeout = p.Permit(call, pod, node)
		return st
	})
	if err != nil {
		return nil, err
	}
	return &pb.PermitReply{Status: reply.Status, TimeoutMs: timeout.Milliseconds(), StateWrites: reply.StateWrites}, nil
}

// PreBindPreFlight runs the plugin's PreBindPreFlight.
func (h *Host) PreBindPreFlight(ctx context.Context, req *pb.NodeRequest) (*pb.StatusReply, error) {
	return h.node(ctx, "PreBindPreFlight", req, func(inst Plugin, call *Call, pod *pb.Pod, node string) *Status {
		if p, ok := inst.(PreBindPlugin); ok {
			return p.PreBindPreFlight(call, pod, node)
		}
		return missing("PreBindPreFlight")
	})
}

// PreBind runs the plugin's PreBind.
func (h *Host) PreBind(ctx context.Context, req *pb.NodeRequest) (*pb.StatusReply, error) {
	return h.node(ctx, "PreBind", req, func(inst Plugin, call *Call, pod *pb.Pod, node string) *Status {
		if p, ok := inst.(PreBindPlugin); ok {
			return p.PreBind(call, pod, node)
		}
		return missing("PreBind")
	})
}

// Bind runs the plugin's Bind.
func (h *Host) Bind(ctx context.Context, req *pb.NodeRequest) (*pb.StatusReply, error) {
	return h.node(ctx, "Bind", req, func(inst Plugin, call *Call, pod *pb.Pod, node string) *Status {
		if p, ok := inst.(BindPlugin); ok {
			return p.Bind(call, pod, node)
		}
		return missing("Bind")
	})
}

// PostBind runs the plugin's PostBind (informational: always Ack).
func (h *Host) PostBind(ctx context.Context, req *pb.NodeRequest) (*pb.Ack, error) {
	_, err := h.node(ctx, "PostBind", req, func(inst Plugin, call *Call, pod *pb.Pod, node string) *Status {
		if p, ok := inst.(PostBindPlugin); ok {
			p.PostBind(call, pod, node)
		}
		return nil
	})
	if err != nil {
		h.log.Printf("PostBind of plugin %s: %v", req.GetCtx().GetPlugin(), err)
	}
	return &pb.Ack{}, nil
}

// ---- queueing ---------------------------------------------------------------------------------------

func (h *Host) podCall(ctx context.Context, point, plugin, profile string, pod *pb.Pod) (Plugin, *Call, trace.Span, error) {
	hp, inst, err := h.instance(plugin, profile)
	if err != nil {
		return nil, nil, nil, err
	}
	c := &pb.CycleContext{Plugin: plugin, Profile: profile, Pod: pod}
	ctx, span := startSpan(ctx, point, nil, cycleAttrs(hp.reg.Name, c)...)
	return inst, &Call{Context: ctx, Point: point, Plugin: plugin, Profile: profile, Framework: h.framework()}, span, nil
}

// PreEnqueue runs the plugin's PreEnqueue.
func (h *Host) PreEnqueue(ctx context.Context, req *pb.PodRequest) (*pb.StatusReply, error) {
	inst, call, span, err := h.podCall(ctx, "PreEnqueue", req.GetPlugin(), req.GetProfile(), req.GetPod())
	if err != nil {
		return nil, err
	}
	st := guard("PreEnqueue of plugin "+req.GetPlugin(), func() *Status {
		if p, ok := inst.(PreEnqueuePlugin); ok {
			return p.PreEnqueue(call, req.GetPod())
		}
		return missing("PreEnqueue")
	})
	endSpan(span, st)
	return &pb.StatusReply{Status: st.ToProto()}, nil
}

// QueueSortKey maps a pod to the plugin's sort key.
func (h *Host) QueueSortKey(ctx context.Context, req *pb.QueueSortKeyRequest) (*pb.QueueSortKeyReply, error) {
	inst, call, span, err := h.podCall(ctx, "QueueSortKey", req.GetPlugin(), req.GetProfile(), req.GetPod())
	if err != nil {
		return nil, err
	}
	defer span.End()
	p, ok := inst.(QueueSortPlugin)
	if !ok {
		return nil, grpcstatus.Errorf(codes.Unimplemented, "plugin %s has no QueueSort", req.GetPlugin())
	}
	var key []any
	if st := guard("SortKey of plugin "+req.GetPlugin(), func() *Status {
		ts := req.GetEnqueueTimestamp()
		key = p.SortKey(call, req.GetPod(), time.Unix(0, int64(ts*1e9)), req.GetAttempts())
		return nil
	}); st != nil {
		return nil, grpcstatus.Error(codes.Internal, st.Message())
	}
	reply := &pb.QueueSortKeyReply{}
	for _, v := range key {
		part := &pb.SortKeyPart{}
		switch x := v.(type) {
		case int:
			part.Value = &pb.SortKeyPart_IntValue{IntValue: int64(x)}
		case int32:
			part.Value = &pb.SortKeyPart_IntValue{IntValue: int64(x)}
		case int64:
			part.Value = &pb.SortKeyPart_IntValue{IntValue: x}
		case float64:
			part.Value = &pb.SortKeyPart_DoubleValue{DoubleValue: x}
		case bool:
			part.Value = &pb.SortKeyPart_IntValue{IntValue: map[bool]int64{false: 0, true: 1}[x]}
		default:
			part.Value = &pb.SortKeyPart_StringValue{StringValue: fmt.Sprint(x)}
		}
		reply.Key = append(reply.Key, part)
	}
	return reply, nil
}

// EventsToRegister lists the plugin's cluster events.
func (h *Host) EventsToRegister(_ context.Context, req *pb.EventsRequest) (*pb.EventsReply, error) {
	hp, ok := h.byName[req.GetPlugin()]
	if !ok {
		return nil, grpcstatus.Error(codes.NotFound, h.unknown(req.GetPlugin()))
	}
	return &pb.EventsReply{Events: hp.manifest.GetEvents()}, nil
}

// QueueingHint asks the plugin whether an event makes a pod it rejected worth retrying (an error or
// a panic counts as yes, as the contract says).
func (h *Host) QueueingHint(ctx context.Context, req *pb.QueueingHintRequest) (*pb.QueueingHintReply, error) {
	inst, call, span, err := h.podCall(ctx, "QueueingHint", req.GetPlugin(), req.GetProfile(), req.GetPod())
	if err != nil {
		return nil, err
	}
	defer span.End()
	queue := true
	guard("QueueingHint of plugin "+req.GetPlugin(), func() *Status {
		if p, ok := inst.(EnqueueExtensions); ok {
			queue = p.QueueingHint(call, req.GetPod(), req.GetEvent(), req.GetOldObjectJson(), req.GetNewObjectJson())
		}
		return nil
	})
	return &pb.QueueingHintReply{Queue: queue}, nil
}

// Stop tells the plugin instances of a profile ("" for all) to stop.
func (h *Host) Stop(_ context.Context, req *pb.StopRequest) (*pb.Ack, error) {
	h.stopInstances(req.GetProfile(), req.GetReason())
	return &pb.Ack{}, nil
}

// ---- Filter and Score streams -----------------------------------------------------------------------

// streamCycle is the cycle a Filter/Score stream is in: set by each start message.
type streamCycle struct {
	hp         *hosted
	inst       Plugin
	ctx        *pb.CycleContext
	state      *CycleState
	withScores bool
	snap       *Snapshot
	snapErr    error
	snapAt     uint64
}

func (h *Host) openCycle(c *pb.CycleContext, withScores bool) (*streamCycle, error) {
	hp, inst, err := h.instance(c.GetPlugin(), c.GetProfile())
	if err != nil {
		return nil, err
	}
	return &streamCycle{hp: hp, inst: inst, ctx: c, state: newCycleState(c, h.framework()), withScores: withScores}, nil
}

// batchCall prepares the call of one batch: its span (a child of the cycle's trace context) and the
// snapshot of the batch's generation.
func (h *Host) batchCall(ctx context.Context, point string, cyc *streamCycle, b *pb.NodeBatch) (*Call, []Node, trace.Span, error) {
	attrs := append(cycleAttrs(cyc.hp.reg.Name, cyc.ctx),
		attribute.Int64("outrigger.batch_seq", int64(b.GetBatchSeq())), attribute.Int("outrigger.nodes", len(b.GetNodeIds())))
	sctx, span := startSpan(ctx, point, cyc.ctx.GetTraceContext(), attrs...)
	call := &Call{Context: sctx, Point: point, Plugin: cyc.hp.reg.Name, Profile: cyc.ctx.GetProfile(), CycleID: cyc.ctx.GetCycleId(),
		Attempt: cyc.ctx.GetAttempt(), State: cyc.state, Framework: h.framework(), View: cyc.ctx.GetNodeView()}
	gen := b.GetSnapshotGeneration()
	if cyc.hp.reg.NeedsSnapshot && (cyc.snap == nil && cyc.snapErr == nil || cyc.snapAt != gen) {
		cyc.snap, cyc.snapErr = h.snapshotFor(sctx, cyc.hp, cyc.ctx, gen)
		cyc.snapAt = gen
	}
	if cyc.snapErr != nil {
		return call, nil, span, cyc.snapErr
	}
	call.Snapshot = cyc.snap
	nodes, err := nodesOf(call, b.GetNodeIds(), b.GetNodeNames())
	return call, nodes, span, err
}

// batchMsg is one message of a Filter or Score stream: a start (ctx set, perhaps with the cycle's first
// batch) or a batch.
type batchMsg struct {
	start      bool
	ctx        *pb.CycleContext
	withScores bool
	batch      *pb.NodeBatch
}

// serveBatches answers one Filter or Score stream: each start message opens a cycle, each batch (a
// separate message, or the "start-batch" one riding in its start) gets one reply from answer.
func (h *Host) serveBatches(point string, recv func() (batchMsg, error), answer func(*streamCycle, *pb.NodeBatch) error) error {
	var cyc *streamCycle
	for {
		msg, err := recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err // cancelled: the framework has what it needs
		}
		if msg.start {
			if cyc, err = h.openCycle(msg.ctx, msg.withScores); err != nil {
				return err
			}
			if msg.batch == nil {
				continue // the cycle's first batch comes in its own message
			}
		}
		if msg.batch == nil {
			return grpcstatus.Errorf(codes.InvalidArgument, "a %s stream message must be a start or a batch", point)
		}
		if cyc == nil {
			return grpcstatus.Errorf(codes.InvalidArgument, "a %s stream must start with %sStart", point, point)
		}
		if err := answer(cyc, msg.batch); err != nil {
			return err
		}
	}
}

// Filter answers a stream of node batches, one FilterReply per batch.
func (h *Host) Filter(stream pb.Plugin_FilterServer) error {
	return h.serveBatches("Filter", func() (batchMsg, error) {
		msg, err := stream.Recv()
		if start := msg.GetStart(); err == nil && start != nil {
			return batchMsg{start: true, ctx: start.GetCtx(), withScores: start.GetWithScores(), batch: start.GetBatch()}, nil
		}
		return batchMsg{batch: msg.GetBatch()}, err
	}, func(cyc *streamCycle, b *pb.NodeBatch) error {
		return stream.Send(h.filterBatch(stream.Context(), cyc, b))
	})
}

func (h *Host) filterBatch(ctx context.Context, cyc *streamCycle, b *pb.NodeBatch) *pb.FilterReply {
	reply := &pb.FilterReply{BatchSeq: b.GetBatchSeq()}
	call, nodes, span, err := h.batchCall(ctx, "Filter", cyc, b)
	what := "Filter of plugin " + cyc.hp.reg.Name
	st := guard(what, func() *Status {
		if err != nil {
			return AsStatus(err)
		}
		p, ok := cyc.inst.(FilterPlugin)
		if !ok {
			return missing("Filter")
		}
		statuses := p.Filter(call, cyc.ctx.GetPod(), nodes)
		if len(statuses) != len(nodes) {
			return AsStatus(fmt.Errorf("%s answered %d of %d nodes", what, len(statuses), len(nodes)))
		}
		reply.Codes = make([]pb.Code, len(nodes))
		index := map[string]uint32{}
		rejected := 0
		for i, s := range statuses {
			if s.IsSuccess() {
				continue
			}
			rejected++
			reply.Codes[i] = s.Code
			text := strings.Join(s.Reasons, "\x00")
			j, seen := index[text]
			if !seen {
				j = uint32(len(reply.ReasonTable))
				index[text] = j
				reply.ReasonTable = append(reply.ReasonTable, &pb.ReasonSet{Reasons: s.Reasons})
			}
			if reply.ReasonIndex == nil {
				reply.ReasonIndex = make([]uint32, len(nodes))
			}
			reply.ReasonIndex[i] = j
		}
		span.SetAttributes(attribute.Int("outrigger.rejected", rejected))
		if cyc.withScores {
			scorer, ok := cyc.inst.(ScorePlugin)
			if !ok {
				return missing("Score")
			}
			passing := make([]Node, 0, len(nodes)-rejected)
			for i, n := range nodes {
				if reply.Codes[i] == Success {
					passing = append(passing, n)
				}
			}
			scores, err := scoresOf(scorer, call, cyc.ctx.GetPod(), passing)
			if err != nil {
				return AsStatus(err)
			}
			reply.Scores = make([]int64, len(nodes))
			j := 0
			for i := range nodes {
				if reply.Codes[i] == Success {
					reply.Scores[i] = scores[j]
					j++
				}
			}
		}
		return nil
	})
	if st != nil {
		reply = &pb.FilterReply{BatchSeq: b.GetBatchSeq(), Error: st.ToProto()}
	}
	endSpan(span, st)
	reply.StateWrites = cyc.state.drain()
	return reply
}

func scoresOf(p ScorePlugin, call *Call, pod *pb.Pod, nodes []Node) ([]int64, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	scores, err := p.Score(call, pod, nodes)
	if err != nil {
		return nil, err
	}
	if len(scores) != len(nodes) {
		return nil, fmt.Errorf("Score of plugin %s returned %d scores for %d nodes", p.Name(), len(scores), len(nodes))
	}
	return scores, nil
}

// Score answers a stream of node batches, one ScoreReply per batch.
func (h *Host) Score(stream pb.Plugin_ScoreServer) error {
	return h.serveBatches("Score", func() (batchMsg, error) {
		msg, err := stream.Recv()
		if start := msg.GetStart(); err == nil && start != nil {
			return batchMsg{start: true, ctx: start.GetCtx(), batch: start.GetBatch()}, nil
		}
		return batchMsg{batch: msg.GetBatch()}, err
	}, func(cyc *streamCycle, b *pb.NodeBatch) error {
		return stream.Send(h.scoreBatch(stream.Context(), cyc, b))
	})
}

func (h *Host) scoreBatch(ctx context.Context, cyc *streamCycle, b *pb.NodeBatch) *pb.ScoreReply {
	reply := &pb.ScoreReply{BatchSeq: b.GetBatchSeq()}
	call, nodes, span, err := h.batchCall(ctx, "Score", cyc, b)
	st := guard("Score of plugin "+cyc.hp.reg.Name, func() *Status {
		if err != nil {
			return AsStatus(err)
		}
		p, ok := cyc.inst.(ScorePlugin)
		if !ok {
			return missing("Score")
		}
		scores, err := scoresOf(p, call, cyc.ctx.GetPod(), nodes)
		if err != nil {
			return AsStatus(err)
		}
		reply.Scores = scores
		return nil
	})
	if st != nil {
		reply = &pb.ScoreReply{BatchSeq: b.GetBatchSeq(), Error: st.ToProto()}
	}
	endSpan(span, st)
	reply.StateWrites = cyc.state.drain()
	return reply
}
