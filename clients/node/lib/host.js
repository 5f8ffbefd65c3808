'use strict';
/**
 * An Outrigger plugin host in Node.js: serves plugin classes to the framework over gRPC, speaking
 * the Plugin service of proto/outrigger/v1/plugin.proto (loaded from the repository's proto/
 * directory at start-up, not from generated code).
 *
 * A plugin is a class with a static `pluginName` and one method per extension point it implements
 * (the host derives the manifest from the methods present):
 *
 *   preEnqueue(pod, call)                     -> Status
 *   sortKey(pod, {enqueueTimestamp, attempts}, call) -> [number|string, ...]
 *   preFilter(state, pod, call)               -> Status | {status, nodeNames}
 *   addPod / removePod(state, pod, other, node, call) -> Status   (PreFilterExtensions)
 *   filter(state, pod, nodes, call)           -> Array<Status|null> (null: the node fits)
 *   postFilter(state, pod, nodeStatuses, call) -> Status | {status, nominatedNodeName}
 *                                             (a result: the pod's nomination, '' clearing it)
 *   preScore(state, pod, nodes, call)         -> Status
 *   score(state, pod, nodes, call)            -> number[] (integers)
 *   normalizeScore(state, pod, nodes, scores, call) -> Status (scores normalized in place)
 *   reserve / unreserve(state, pod, nodeName, call) -> Status / nothing
 *   permit(state, pod, nodeName, call)        -> Status | {status, timeoutMs}
 *   preBindPreFlight / preBind / bind(state, pod, nodeName, call) -> Status
 *   postBind(state, pod, nodeName, call)      -> nothing
 *   queueingHint(pod, event, oldObject, newObject) -> boolean (with static `events`)
 *   generatePlacements(state, group, parent, call) -> [{name, nodes}] | {status, placements}
 *   scorePlacement(state, group, placement, proposed, call) -> integer | {status, score}
 *   normalizePlacementScore(state, group, placements, scores, call) -> Status (scores in place)
 *                                             (a PodGroup cycle's points: lib/placement.js)
 *   podGroupPostFilter(state, group, schedule, call) -> Status | {status, nominations, victims}
 *                                             (preemption for a group, `await schedule(removedUids)`
 *                                             asking to place it without some pods: lib/groupfilter.js)
 *   signPod(pod, call)                        -> [[key, value], ...] | null (cannot sign) | Status
 *                                             (opportunistic batching: lib/sign.js)
 *
 * Static options: `stateKeys` (CycleState keys sent with every request), `batchSize` (preferred nodes
 * per batch), `filterAndScore` (answer Score in the Filter exchange), `events` (cluster events:
 * [{resource, action, hint}]). Methods may be async. `nodes` are `{id, name}`: this host does not
 * follow the snapshot mirror (needs_snapshot = false), so the framework puts node names in every
 * batch; plugins read node objects with `await call.nodeInfos()` (name -> NodeInfo: the snapshot of
 * the call's generation, read once per generation through the Handle service, with the request's
 * node_view applied). An instance with a `stop(reason)` method is told when the framework calls
 * Plugin.Stop.
 *
 * Volumes: a pod's volumes are `pod.spec.volumes` (outrigger.v1.PodVolume: name, source, claim_name,
 * ...). A plugin class with `static needsVolumes = true` also reads the storage objects behind them:
 * the host then follows the framework's snapshot stream for PersistentVolumeClaims,
 * PersistentVolumes, StorageClasses and CSINodes (lib/volumes.js), and `await call.volumes()` gives a
 * lister of them (claim(namespace, name), volume(name), storageClass(name), csiNode(name),
 * list(kind)) once the host has applied the call's snapshot generation.
 *
 * Devices: a pod's claims are `pod.spec.resource_claims` (and, for those made from templates,
 * `pod.status.resource_claim_statuses`). A plugin class with `static needsDevices = true` also reads
 * the device objects of dynamic resource allocation: the host then follows the ResourceSlices,
 * DeviceClasses and ResourceClaims too (lib/devices.js), and `await call.devices()` gives a lister of
 * them (slice(name), deviceClass(name), claim(namespace, name), list(kind), podClaims(pod),
 * nodeDevices(node), inUseOnNode(node), freeOnNode(node), allocated()) once the host has applied the
 * call's snapshot generation; a claim an earlier pod's Reserve allocated is allocated there already.
 *
 * The constructor gets `(args, framework)`: the plugin's pluginConfig args for one profile, and the
 * client of the framework's Handle and CycleState services. A throwing constructor rejects the
 * configuration with its message. A throwing method becomes an Error status for that call (the
 * framework reports `running <Point> plugin 'X': <message>`); the host keeps serving.
 */

const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { HealthImplementation } = require('grpc-health-check');
const tracing = require('./tracing');
const { CycleState } = require('./state');
const { StorageMirror, followStorage } = require('./volumes');
const { DeviceMirror } = require('./devices');
const { placementHandlers } = require('./placement');
const { groupFilterHandler } = require('./groupfilter');
const { signReply, canonicalJson } = require('./sign');

const HOST_VERSION = '0.1.0-node';
const HEALTH_SERVICE = 'outrigger.v1.Plugin';
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
// Calls the host makes to the framework never wait longer than this (nor past the request's deadline).
const FRAMEWORK_CALL_MS = 5000;
// Snapshot generations whose node lists are kept (cycles in flight read recent generations).
const KEPT_GENERATIONS = 8;
// How long a call waits for the storage mirror to reach its generation.
const MIRROR_WAIT_MS = 5000;

const PROTO_DIR = process.env.OUTRIGGER_PROTO_DIR || path.resolve(__dirname, '..', '..', '..', 'proto');

function loadProtos(protoDir = PROTO_DIR) {
  const def = protoLoader.loadSync(
    ['outrigger/v1/plugin.proto', 'outrigger/v1/handle.proto', 'outrigger/v1/cyclestate.proto'],
    { includeDirs: [protoDir], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true },
  );
  return grpc.loadPackageDefinition(def).outrigger.v1;
}

// ------------------------------------------------------------------------------------------------
// Status

const Code = Object.freeze({
  Success: 'CODE_SUCCESS',
  Error: 'CODE_ERROR',
  Unschedulable: 'CODE_UNSCHEDULABLE',
  UnschedulableAndUnresolvable: 'CODE_UNSCHEDULABLE_AND_UNRESOLVABLE',
  Wait: 'CODE_WAIT',
  Skip: 'CODE_SKIP',
  Pending: 'CODE_PENDING',
});
const VALID_CODES = new Set(Object.values(Code));

/** A plugin's answer: a code and user-readable reasons (outrigger.v1.Status). */
const Status = {
  success: () => ({ code: Code.Success, reasons: [] }),
  skip: () => ({ code: Code.Skip, reasons: [] }),
  error: (reason) => ({ code: Code.Error, reasons: [String(reason)] }),
  unschedulable: (...reasons) => ({ code: Code.Unschedulable, reasons }),
  unresolvable: (...reasons) => ({ code: Code.UnschedulableAndUnresolvable, reasons }),
  wait: () => ({ code: Code.Wait, reasons: [] }),
};

function toStatus(value, what) {
  if (value === undefined || value === null) return Status.success();
  if (typeof value !== 'object' || !VALID_CODES.has(value.code)) {
    throw new TypeError(`${what} returned ${JSON.stringify(value)}, not a Status ({code, reasons})`);
  }
  return { code: value.code, reasons: (value.reasons || []).map(String), plugin: '' };
}

function failure(err) {
  return Status.error((err && err.message) || String(err));
}

// ------------------------------------------------------------------------------------------------
// The framework's Handle and CycleState services

class CallError extends Error {
  /** A gRPC status to end the RPC with (the framework maps it to an Error status for the plugin). */
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function deadlineOf(ms) {
  return new Date(Date.now() + ms);
}

/** The framework's Handle and CycleState services, as a plugin reaches them. */
class FrameworkClient {
  constructor(proto, address) {
    this.address = address;
    const creds = grpc.credentials.createInsecure();
    const options = {
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_reconnect_backoff_ms': 1000,
    };
    this.handle = new proto.Handle(address, creds, options);
    this.cycleState = new proto.CycleState(address, creds, options);
    this._nodes = new Map(); // generation -> Promise<Map<name, NodeInfo>>
    // HandshakeRequest.credential: the framework serves only the hosts it registered, which send it back.
    this.credential = '';
  }

  _unary(stub, method, request, timeoutMs = FRAMEWORK_CALL_MS) {
    const metadata = new grpc.Metadata();
    if (this.credential) metadata.set('authorization', `Bearer ${this.credential}`);
    return new Promise((resolve, reject) => {
      stub[method](request, metadata, { deadline: deadlineOf(timeoutMs) }, (err, reply) => {
        if (err) reject(new Error(`${method} at the framework (${this.address}): ${err.details || err.message}`));
        else resolve(reply);
      });
    });
  }

  /**
   * Every node of the snapshot at `generation` (0: the latest), by name. Fetched once per
   * generation with Handle.ListNodeInfos and shared by concurrent calls; the last few generations
   * are kept.
   * @returns {Promise<Map<string, object>>}
   */
  nodeInfos(generation) {
    const key = Number(generation) || 0;
    let found = key ? this._nodes.get(key) : undefined;
    if (found === undefined) {
      found = this._unary(this.handle, 'ListNodeInfos', { generation: key }).then(
        (reply) => new Map(reply.nodes.map((info) => [info.node.metadata.name, info])),
      );
      if (key) {
        this._nodes.set(key, found);
        found.catch(() => this._nodes.delete(key)); // a failed read is not cached
        while (this._nodes.size > KEPT_GENERATIONS) this._nodes.delete(this._nodes.keys().next().value);
      }
    }
    return found;
  }

  /** One node of the snapshot ({name} or {id}) at `generation` (0: the latest). */
  getNodeInfo(which, generation = 0) {
    return this._unary(this.handle, 'GetNodeInfo', { ...which, generation });
  }

  /** CycleState.Read: entries of a cycle (the slow path for keys a plugin did not declare). */
  async readState(cycleId, plugin, keys) {
    const reply = await this._unary(this.cycleState, 'Read', { cycle_id: cycleId, plugin, keys });
    return reply.entries;
  }

  /** CycleState.Write: entries written at once rather than on the reply. */
  async writeState(cycleId, plugin, entries) {
    await this._unary(this.cycleState, 'Write', { cycle_id: cycleId, plugin, entries });
  }

  close() {
    this.handle.close();
    this.cycleState.close();
  }
}

// ------------------------------------------------------------------------------------------------
// Manifests

const POINT_METHODS = [
  ['preEnqueue', 'EXTENSION_POINT_PRE_ENQUEUE'],
  ['sortKey', 'EXTENSION_POINT_QUEUE_SORT'],
  ['preFilter', 'EXTENSION_POINT_PRE_FILTER'],
  ['addPod', 'EXTENSION_POINT_PRE_FILTER_EXTENSIONS'],
  ['filter', 'EXTENSION_POINT_FILTER'],
  ['postFilter', 'EXTENSION_POINT_POST_FILTER'],
  ['preScore', 'EXTENSION_POINT_PRE_SCORE'],
  ['score', 'EXTENSION_POINT_SCORE'],
  ['normalizeScore', 'EXTENSION_POINT_NORMALIZE_SCORE'],
  ['reserve', 'EXTENSION_POINT_RESERVE'],
  ['permit', 'EXTENSION_POINT_PERMIT'],
  ['preBind', 'EXTENSION_POINT_PRE_BIND'],
  ['preBindPreFlight', 'EXTENSION_POINT_PRE_BIND_PRE_FLIGHT'],
  ['bind', 'EXTENSION_POINT_BIND'],
  ['postBind', 'EXTENSION_POINT_POST_BIND'],
  ['queueingHint', 'EXTENSION_POINT_ENQUEUE_EXTENSIONS'],
  ['generatePlacements', 'EXTENSION_POINT_PLACEMENT_GENERATE'],
  ['scorePlacement', 'EXTENSION_POINT_PLACEMENT_SCORE'],
  ['normalizePlacementScore', 'EXTENSION_POINT_NORMALIZE_PLACEMENT_SCORE'],
  ['podGroupPostFilter', 'EXTENSION_POINT_POD_GROUP_POST_FILTER'],
  ['signPod', 'EXTENSION_POINT_SIGN'],
];

class PluginDefinitionError extends TypeError {}

/** The PluginManifest of a plugin class; PluginDefinitionError saying what to fix otherwise. */
function manifestOf(cls) {
  if (typeof cls !== 'function' || !cls.prototype) {
    throw new PluginDefinitionError(`${String(cls)} is not a plugin class`);
  }
  const name = cls.pluginName;
  if (typeof name !== 'string' || !name) {
    throw new PluginDefinitionError(`plugin class ${cls.name} has no name: set \`static pluginName = 'MyPlugin'\``);
  }
  const has = (m) => typeof cls.prototype[m] === 'function';
  const points = POINT_METHODS.filter(([m]) => has(m)).map(([, p]) => p);
  if (!points.length) throw new PluginDefinitionError(`plugin ${name} implements no extension point`);
  if (has('addPod') !== has('removePod')) {
    throw new PluginDefinitionError(`plugin ${name}: PreFilter extensions need both addPod and removePod`);
  }
  if (has('normalizeScore') && !has('score')) {
    throw new PluginDefinitionError(`plugin ${name}: normalizeScore needs score`);
  }
  if (has('signPod') && !['preFilter', 'filter', 'preScore', 'score'].some(has)) {
    throw new PluginDefinitionError(`plugin ${name}: signPod needs preFilter, filter, preScore or score (the points it signs for)`);
  }
  if (has('normalizePlacementScore') && !has('scorePlacement')) {
    throw new PluginDefinitionError(`plugin ${name}: normalizePlacementScore needs scorePlacement`);
  }
  const stateKeys = cls.stateKeys || [];
  if (!Array.isArray(stateKeys) || !stateKeys.every((k) => typeof k === 'string' && k)) {
    throw new PluginDefinitionError(`plugin ${name}: stateKeys must be an array of non-empty strings`);
  }
  const batchSize = cls.batchSize || 0;
  if (!Number.isInteger(batchSize) || batchSize < 0) {
    throw new PluginDefinitionError(`plugin ${name}: batchSize must be an integer >= 0 (0: the framework's choice)`);
  }
  const filterAndScore = Boolean(cls.filterAndScore);
  if (filterAndScore && !(has('filter') && has('score'))) {
    throw new PluginDefinitionError(`plugin ${name}: filterAndScore needs both filter and score`);
  }
  const events = (cls.events || []).map((e) => ({
    event: { resource: String(e.resource), action: String(e.action) },
    has_queueing_hint: Boolean(e.hint),
  }));
  if (events.some((e) => e.has_queueing_hint) && !has('queueingHint')) {
    throw new PluginDefinitionError(`plugin ${name}: an event with hint: true needs a queueingHint method`);
  }
  const needsVolumes = cls.needsVolumes === undefined ? false : cls.needsVolumes;
  if (typeof needsVolumes !== 'boolean') {
    throw new PluginDefinitionError(`plugin ${name}: needsVolumes must be true or false`);
  }
  const needsDevices = cls.needsDevices === undefined ? false : cls.needsDevices;
  if (typeof needsDevices !== 'boolean') {
    throw new PluginDefinitionError(`plugin ${name}: needsDevices must be true or false`);
  }
  if (events.length && !points.includes('EXTENSION_POINT_ENQUEUE_EXTENSIONS')) {
    points.push('EXTENSION_POINT_ENQUEUE_EXTENSIONS');
  }
  return {
    name,
    points,
    state_keys: stateKeys,
    preferred_batch_size: batchSize,
    filter_and_score: filterAndScore,
    needs_snapshot: false, // batches carry node names; node objects come from the Handle service
    needs_volumes: needsVolumes, // the host follows the mirror for storage objects alone
    needs_devices: needsDevices, // ... and for device objects
    events,
  };
}

// ------------------------------------------------------------------------------------------------
// The Plugin service

function podKey(pod) {
  const meta = (pod && pod.metadata) || {};
  return `${meta.namespace || ''}/${meta.name || ''}`;
}

/** The attributes of a call's span (the Python host's, pluginhost/tracing.py). */
function spanAttributes(hosted, ctx) {
  const attrs = { 'outrigger.plugin': hosted.manifest.name, 'outrigger.profile': ctx.profile || '' };
  if (ctx.cycle_id) {
    attrs['outrigger.cycle_id'] = ctx.cycle_id;
    attrs['outrigger.attempt'] = ctx.attempt || 0;
    attrs['outrigger.snapshot.generation'] = Number(ctx.snapshot_generation) || 0;
  }
  if (ctx.pod) attrs['outrigger.pod'] = podKey(ctx.pod);
  return attrs;
}

function nodesOf(ids, names) {
  if (ids.length && names.length !== ids.length) {
    throw new CallError(grpc.status.INVALID_ARGUMENT,
      `the request carries ${ids.length} node ids but ${names.length} node names (this host needs names)`);
  }
  return ids.map((id, i) => ({ id, name: names[i] }));
}

class PluginHost {
  /**
   * @param {Function[]} plugins plugin classes
   * @param {{listen?: string, framework?: string, protoDir?: string}} options
   */
  constructor(plugins, options = {}) {
    this.proto = loadProtos(options.protoDir);
    this.plugins = new Map();
    for (const cls of plugins) {
      const manifest = manifestOf(cls);
      if (this.plugins.has(manifest.name)) {
        throw new PluginDefinitionError(`two hosted plugins are named ${manifest.name}`);
      }
      this.plugins.set(manifest.name, { cls, manifest, instances: new Map(), args: new Map(), stopped: new Set() });
    }
    if (!this.plugins.size) throw new PluginDefinitionError('a plugin host needs at least one plugin class');
    this.listen = options.listen || '127.0.0.1:50061';
    this.fixedFramework = options.framework || '';
    this.framework = this.fixedFramework ? new FrameworkClient(this.proto, this.fixedFramework) : null;
    this.server = null;
    this.health = new HealthImplementation({ '': 'NOT_SERVING', [HEALTH_SERVICE]: 'NOT_SERVING' });
    this.port = 0;
    this.log = options.log || ((msg) => console.error(msg));
    // Storage objects, followed only when some plugin declares needsVolumes.
    this.storage = new StorageMirror();
    this.followsVolumes = [...this.plugins.values()].some((h) => h.manifest.needs_volumes);
    // Device objects, followed (on the same stream) only when some plugin declares needsDevices.
    this.devices = new DeviceMirror();
    this.followsDevices = [...this.plugins.values()].some((h) => h.manifest.needs_devices);
    this._unfollow = null;
    this._stopped = false;
  }

  /** (Re)starts following the framework's storage and device objects from scratch (a new framework). */
  _followStorage() {
    if (!(this.followsVolumes || this.followsDevices) || this.framework === null || this._stopped) return;
    if (this._unfollow !== null) this._unfollow();
    this.storage.reset();
    this.devices.reset();
    const first = this.plugins.keys().next().value;
    const { storage, devices } = this;
    // One stream for both; the storage mirror keeps the generation calls wait for, so devices apply first.
    const mirror = {
      get generation() { return storage.generation; },
      apply(delta) { devices.apply(delta); storage.apply(delta); },
    };
    this._unfollow = followStorage(this.framework, mirror, first, this.log, () => this._stopped,
      { volumes: this.followsVolumes, devices: this.followsDevices });
  }

  get address() {
    const host = this.listen.slice(0, this.listen.lastIndexOf(':')) || '127.0.0.1';
    return `${host}:${this.port}`;
  }

  /** Binds and starts serving; resolves to the bound port. */
  async start() {
    const server = new grpc.Server({
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
    });
    server.addService(this.proto.Plugin.service, this._handlers());
    this.health.addToServer(server);
    this.port = await new Promise((resolve, reject) => {
      server.bindAsync(this.listen, grpc.ServerCredentials.createInsecure(), (err, port) => {
        if (err) reject(new Error(`cannot listen on ${this.listen}: ${err.message}`));
        else resolve(port);
      });
    });
    this.server = server;
    this.health.setStatus('', 'SERVING');
    this.health.setStatus(HEALTH_SERVICE, 'SERVING');
    if (this.fixedFramework) this._followStorage();
    return this.port;
  }

  /** Graceful stop: NOT_SERVING, then in-flight calls get `graceMs` before being cut. Idempotent. */
  async stop(graceMs = 5000) {
    const server = this.server;
    if (server === null) return;
    this.server = null;
    this._stopped = true;
    if (this._unfollow !== null) this._unfollow();
    this.health.setStatus('', 'NOT_SERVING');
    this.health.setStatus(HEALTH_SERVICE, 'NOT_SERVING');
    await new Promise((resolve) => {
      const timer = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, graceMs);
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    if (this.framework !== null) this.framework.close();
  }

  // ---- plumbing --------------------------------------------------------------------------------

  _hosted(plugin) {
    const hosted = this.plugins.get(plugin);
    if (hosted === undefined) {
      throw new CallError(grpc.status.NOT_FOUND,
        `this plugin host has no plugin named '${plugin}' (it hosts ${[...this.plugins.keys()].join(', ')})`);
    }
    return hosted;
  }

  _instance(plugin, profile) {
    const hosted = this._hosted(plugin);
    const inst = hosted.instances.get(profile);
    if (inst === undefined) {
      // The framework configures the plugin again and retries on this code (e.g. after a restart).
      throw new CallError(grpc.status.FAILED_PRECONDITION, `plugin '${plugin}' is not configured for profile '${profile}'`);
    }
    return { hosted, inst };
  }

  _framework() {
    if (this.framework === null) {
      throw new Error('the framework address is unknown (no Handshake yet, and no --framework given)');
    }
    return this.framework;
  }

  /** What a plugin method gets as its last argument: who, where, and the framework client. */
  _call(hosted, point, ctx, span, rpc) {
    const profile = ctx.profile || '';
    return {
      plugin: hosted.manifest.name,
      point,
      profile,
      args: hosted.args.get(profile) || {},
      cycleId: ctx.cycle_id || '',
      attempt: ctx.attempt || 0,
      generation: Number(ctx.snapshot_generation) || 0,
      framework: this.framework,
      span,
      deadline: rpc && typeof rpc.getDeadline === 'function' ? rpc.getDeadline() : Infinity,
      /**
       * The nodes of this call's view, by name: the snapshot of its generation (Handle.ListNodeInfos,
       * shared per generation) with the request's node_view applied (what-if nodes and pods,
       * transformers' changes), so a plugin sees what in-process plugins see.
       * @returns {Promise<Map<string, object>>}
       */
      nodeInfos: async () => {
        if (this.framework === null) {
          throw new Error('the framework address is unknown (no Handshake yet, and no --framework given)');
        }
        const generation = Number(ctx.snapshot_generation) || 0;
        return applyView(await this.framework.nodeInfos(generation), ctx.node_view, generation);
      },
      /**
       * The storage objects (claims, volumes, classes, CSINodes) once the host has applied this call's
       * snapshot generation: a lister (lib/volumes.js VolumeLister). Only for plugins declaring
       * `static needsVolumes = true`.
       */
      volumes: async () => {
        if (!hosted.manifest.needs_volumes) {
          throw new Error(`plugin ${hosted.manifest.name} reads storage objects: set \`static needsVolumes = true\``);
        }
        await this.storage.waitFor(Number(ctx.snapshot_generation) || 0, MIRROR_WAIT_MS);
        return this.storage.lister();
      },
      /**
       * The device objects (ResourceSlices, DeviceClasses, ResourceClaims) once the host has applied
       * this call's snapshot generation: a lister (lib/devices.js DeviceLister). Only for plugins
       * declaring `static needsDevices = true`.
       */
      devices: async () => {
        if (!hosted.manifest.needs_devices) {
          throw new Error(`plugin ${hosted.manifest.name} reads device objects: set \`static needsDevices = true\``);
        }
        await this.storage.waitFor(Number(ctx.snapshot_generation) || 0, MIRROR_WAIT_MS);
        return this.devices.lister();
      },
    };
  }

  _state(hosted, ctx) {
    return new CycleState(ctx.cycle_id || '', hosted.manifest.name, hosted.manifest.state_keys, ctx.state || [],
      this.framework);
  }

  // ---- handlers ----------------------------------------------------------------------------------

  _handlers() {
    const unary = (fn) => (rpc, callback) => {
      Promise.resolve()
        .then(() => fn(rpc.request, rpc))
        .then((reply) => callback(null, reply))
        .catch((err) => {
          if (err instanceof CallError) callback({ code: err.code, details: err.message });
          else callback({ code: grpc.status.INTERNAL, details: (err && err.message) || String(err) });
        });
    };
    const node = (point, method, shape) => unary((req, rpc) => this._cycleCall(point, req, rpc, async (inst, state, pod, call) => {
      const answer = await inst[method](state, pod, req.node_name, call);
      return shape(answer);
    }));
    const statusReply = (what) => (answer) => ({ status: toStatus(answer, what) });
    const informational = (point, method) => unary(async (req, rpc) => {
      const reply = await this._cycleCall(point, req, rpc, async (inst, state, pod, call) => {
        await inst[method](state, pod, req.node_name, call);
        return {};
      });
      if (reply.status && reply.status.code === Code.Error) {
        this.log(`${point} of plugin ${req.ctx && req.ctx.plugin} failed: ${reply.status.reasons.join('; ')}`);
      }
      return {};
    });
    const groupCall = (point, req, rpc, cycleId, fn) => this._groupCall(point, req, rpc, cycleId, fn);
    return {
      Handshake: unary((req) => this._handshake(req)),
      Configure: unary((req) => this._configure(req)),
      PreEnqueue: unary((req, rpc) => this._podCall('PreEnqueue', req, rpc, async (inst, call) => ({
        status: toStatus(await inst.preEnqueue(req.pod, call), 'preEnqueue'),
      }))),
      QueueSortKey: unary((req, rpc) => this._queueSortKey(req, rpc)),
      SignPod: unary((req, rpc) => this._podCall('SignPod', req, rpc, async (inst, call) => (
        signReply(await inst.signPod(req.pod, call), toStatus)))),
      EventsToRegister: unary((req) => ({ events: this._hosted(req.plugin).manifest.events })),
      QueueingHint: unary((req) => this._queueingHint(req)),
      PreFilter: unary((req, rpc) => this._cycleCall('PreFilter', req, rpc, async (inst, state, pod, call) => {
        const answer = await inst.preFilter(state, pod, call);
        const isResult = answer && typeof answer === 'object' && 'status' in answer;
        const reply = { status: toStatus(isResult ? answer.status : answer, 'preFilter') };
        if (isResult && Array.isArray(answer.nodeNames)) {
          reply.narrowed = true;
          reply.node_names = [...answer.nodeNames].map(String).sort();
        }
        return reply;
      })),
      PreFilterAddPod: unary((req, rpc) => this._extension('PreFilterAddPod', 'addPod', req, rpc)),
      PreFilterRemovePod: unary((req, rpc) => this._extension('PreFilterRemovePod', 'removePod', req, rpc)),
      Filter: (rpc) => this._batches('Filter', rpc),
      PostFilter: unary((req, rpc) => this._cycleCall('PostFilter', req, rpc, async (inst, state, pod, call) => {
        return postFilterReply(await inst.postFilter(state, pod, req.node_statuses || {}, call));
      })),
      PreScore: unary((req, rpc) => this._cycleCall('PreScore', req, rpc, async (inst, state, pod, call) => {
        const nodes = nodesOf(req.feasible_node_ids, req.feasible_node_names);
        return { status: toStatus(await inst.preScore(state, pod, nodes, call), 'preScore') };
      })),
      Score: (rpc) => this._batches('Score', rpc),
      NormalizeScore: unary((req, rpc) => this._cycleCall('NormalizeScore', req, rpc, async (inst, state, pod, call) => {
        const nodes = nodesOf(req.node_ids, req.node_names);
        const scores = req.scores.map(Number);
        const status = toStatus(await inst.normalizeScore(state, pod, nodes, scores, call), 'normalizeScore');
        checkScores(scores, nodes.length, 'normalizeScore');
        return { status, scores };
      })),
      Reserve: node('Reserve', 'reserve', statusReply('reserve')),
      Unreserve: informational('Unreserve', 'unreserve'),
      Permit: node('Permit', 'permit', (answer) => {
        const isResult = answer && typeof answer === 'object' && 'status' in answer;
        return {
          status: toStatus(isResult ? answer.status : answer, 'permit'),
          timeout_ms: isResult ? Math.trunc(Number(answer.timeoutMs) || 0) : 0,
        };
      }),
      PreBindPreFlight: node('PreBindPreFlight', 'preBindPreFlight', statusReply('preBindPreFlight')),
      PreBind: node('PreBind', 'preBind', statusReply('preBind')),
      Bind: node('Bind', 'bind', statusReply('bind')),
      PostBind: informational('PostBind', 'postBind'),
      Stop: unary(async (req) => {
        await this._stopInstances(req.profile, req.reason);
        return {};
      }),
      ...placementHandlers(unary, groupCall, grpc.status, { CallError, Code, toStatus }),
      PodGroupPostFilter: groupFilterHandler(groupCall, grpc.status, { CallError, toStatus }),
    };
  }

  /**
   * A PodGroup point's call (lib/placement.js): a cycle call whose CycleState is the group cycle's
   * (`cycleId`, the placement's, for ScorePlacement), with the group's key on its span.
   */
  _groupCall(point, req, rpc, cycleId, fn) {
    const group = req.ctx || {};
    const ctx = { ...group, cycle_id: cycleId || group.group_cycle_id || '', pod: undefined };
    return this._cycleCall(point, { ctx }, rpc, (inst, state, _pod, call) => {
      if (call.span) call.span.setAttribute('outrigger.pod_group', `${group.namespace || ''}/${group.name || ''}`);
      return fn(inst, state, call);
    });
  }

  /** Plugin.Stop: the instances of `profile` ("" for all) that have a `stop` method are told to stop. */
  async _stopInstances(profile, reason) {
    for (const hosted of this.plugins.values()) {
      for (const [p, inst] of hosted.instances) {
        if ((profile && p !== profile) || typeof inst.stop !== 'function') continue;
        hosted.stopped.add(p); // configured again, it is built again
        try {
          await inst.stop(reason || '');
        } catch (err) {
          this.log(`stopping plugin ${hosted.manifest.name} for profile '${p}' failed: ${err.message}`);
        }
      }
    }
  }

  _handshake(req) {
    if (!this.fixedFramework && req.framework_address
        && (this.framework === null || this.framework.address !== req.framework_address)) {
      if (this.framework !== null) this.framework.close();
      this.framework = new FrameworkClient(this.proto, req.framework_address);
    }
    if (this.framework !== null) this.framework.credential = req.credential || '';
    this._followStorage(); // (again: a handshake may come from a restarted framework)
    return {
      plugins: [...this.plugins.values()].map((h) => h.manifest),
      host_version: HOST_VERSION,
      features: ['start-batch'],
    };
  }

  _configure(req) {
    let hosted;
    try {
      hosted = this._hosted(req.plugin);
    } catch (err) {
      return { status: failure(err) };
    }
    let args;
    try {
      args = req.args_json ? JSON.parse(req.args_json) : {};
    } catch (err) {
      return { status: Status.error(`invalid args: not valid JSON: ${err.message}`) };
    }
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
      return { status: Status.error(`invalid args: args must be a JSON object, got ${JSON.stringify(args)}`) };
    }
    const kept = hosted.instances.get(req.profile);
    if (kept !== undefined && !hosted.stopped.has(req.profile)
        && canonicalJson(hosted.args.get(req.profile)) === canonicalJson(args)) {
      // The framework configures again after any failed call, as it cannot tell a slow host from a
      // restarted one: the same args keep the instance and its state.
      return { status: Status.success() };
    }
    let inst;
    try {
      inst = new hosted.cls(args, this.framework);
    } catch (err) {
      this.log(`configuring plugin ${hosted.manifest.name} for profile '${req.profile}' failed: ${err.message}`);
      return { status: failure(err) };
    }
    const live = kept !== undefined && !hosted.stopped.has(req.profile);
    hosted.instances.set(req.profile, inst);
    hosted.args.set(req.profile, args);
    hosted.stopped.delete(req.profile);
    if (live && typeof kept.stop === 'function') {
      Promise.resolve().then(() => kept.stop('configured again')).catch((err) => {
        this.log(`stopping plugin ${hosted.manifest.name} for profile '${req.profile}' failed: ${err.message}`);
      });
    }
    return { status: Status.success() };
  }

  async _podCall(point, req, rpc, fn) {
    const { hosted, inst } = this._instance(req.plugin, req.profile);
    const span = tracing.startCallSpan(point, tracing.parentContext(undefined, rpc.metadata),
      spanAttributes(hosted, { profile: req.profile, pod: req.pod }));
    try {
      return await fn(inst, this._call(hosted, point, { profile: req.profile }, span, rpc));
    } catch (err) {
      span.recordException(err);
      return { status: failure(err) };
    } finally {
      span.end();
    }
  }

  async _queueSortKey(req, rpc) {
    const { hosted, inst } = this._instance(req.plugin, req.profile);
    const call = this._call(hosted, 'QueueSortKey', { profile: req.profile }, null, rpc);
    let key;
    try {
      key = await inst.sortKey(req.pod, { enqueueTimestamp: req.enqueue_timestamp, attempts: req.attempts }, call);
    } catch (err) {
      throw new CallError(grpc.status.INTERNAL, `sortKey failed: ${err.message}`);
    }
    const parts = (Array.isArray(key) ? key : [key]).map((v) => {
      if (typeof v === 'number' && Number.isInteger(v)) return { int_value: v };
      if (typeof v === 'number') return { double_value: v };
      if (typeof v === 'boolean') return { int_value: v ? 1 : 0 };
      return { string_value: String(v) };
    });
    return { key: parts };
  }

  async _queueingHint(req) {
    const { inst } = this._instance(req.plugin, req.profile);
    const parse = (buf) => {
      if (!buf || !buf.length) return null;
      try {
        return JSON.parse(buf.toString('utf8'));
      } catch {
        return null; // the contract: old/new may be partial
      }
    };
    try {
      const queue = await inst.queueingHint(req.pod, req.event, parse(req.old_object_json), parse(req.new_object_json));
      return { queue: Boolean(queue) };
    } catch (err) {
      this.log(`queueing hint of plugin ${req.plugin} failed: ${err.message}`);
      return { queue: true }; // the contract: an error counts as Queue
    }
  }

  /**
   * A cycle-scoped unary call: the plugin's instance, a CycleState from ctx.state, a span under the
   * request's trace context; `fn` builds the reply, whose state_writes the host fills. A throwing
   * plugin gets an Error status.
   */
  async _cycleCall(point, req, rpc, fn) {
    const ctx = req.ctx || {};
    const { hosted, inst } = this._instance(ctx.plugin, ctx.profile);
    const state = this._state(hosted, ctx);
    const span = tracing.startCallSpan(point, tracing.parentContext(ctx.trace_context, rpc.metadata),
      spanAttributes(hosted, ctx));
    let reply;
    try {
      reply = await fn(inst, state, ctx.pod, this._call(hosted, point, ctx, span, rpc));
    } catch (err) {
      span.recordException(err);
      span.setStatus({ code: tracing.api.SpanStatusCode.ERROR, message: err.message });
      reply = { status: failure(err) };
    }
    if (reply.status) span.setAttribute('outrigger.code', reply.status.code);
    span.end();
    reply.state_writes = state.drainWrites();
    return reply;
  }

  _extension(point, method, req, rpc) {
    return this._cycleCall(point, req, rpc, async (inst, state, pod, call) => {
      const node = { id: req.node_id, name: req.node_name };
      return { status: toStatus(await inst[method](state, pod, req.other_pod, node, call), method) };
    });
  }

  /**
   * A Filter or Score stream: a start message opens a cycle, then one reply per NodeBatch, echoing
   * its batch_seq. A later start message on the same stream opens the next cycle. Messages of one
   * stream are handled in order; streams are independent of each other.
   */
  _batches(point, rpc) {
    let cycle = null;
    let closed = false;
    let chain = Promise.resolve();
    const fail = (code, message) => {
      if (closed) return;
      closed = true;
      rpc.emit('error', { code, details: message });
    };
    const onMessage = async (received) => {
      if (closed || rpc.cancelled) return;
      let msg = received;
      if (msg.msg === 'start') {
        cycle = this._openCycle(point, msg.start);
        // The "start-batch" feature: the cycle's first batch may ride in its start message.
        if (!msg.start.batch) return;
        msg = { msg: 'batch', batch: msg.start.batch };
      }
      if (msg.msg !== 'batch') {
        fail(grpc.status.INVALID_ARGUMENT, `a ${point} stream message must be a start or a batch`);
        return;
      }
      if (cycle === null) {
        fail(grpc.status.INVALID_ARGUMENT, `a ${point} stream must start with ${point}Start`);
        return;
      }
      const reply = await this._answerBatch(point, cycle, msg.batch, rpc);
      if (!closed && !rpc.cancelled) rpc.write(reply);
    };
    rpc.on('data', (msg) => {
      chain = chain.then(() => onMessage(msg)).catch((err) => {
        const code = err instanceof CallError ? err.code : grpc.status.INTERNAL;
        fail(code, err.message);
      });
    });
    rpc.on('end', () => {
      chain.then(() => {
        if (!closed) {
          closed = true;
          rpc.end();
        }
      });
    });
    rpc.on('cancelled', () => {
      closed = true; // the framework has what it needs (or gave up): nothing more is written
    });
  }

  _openCycle(point, start) {
    const ctx = start.ctx || {};
    const { hosted, inst } = this._instance(ctx.plugin, ctx.profile);
    return {
      hosted,
      inst,
      ctx,
      pod: ctx.pod,
      state: this._state(hosted, ctx),
      parent: tracing.parentContext(ctx.trace_context, undefined),
      withScores: point === 'Filter' && Boolean(start.with_scores),
    };
  }

  async _answerBatch(point, cycle, batch, rpc) {
    const { hosted, inst, state, pod, ctx } = cycle;
    const span = tracing.startCallSpan(point, cycle.parent, {
      ...spanAttributes(hosted, ctx),
      'outrigger.batch_seq': batch.batch_seq,
      'outrigger.nodes': batch.node_ids.length,
    });
    const call = this._call(hosted, point, { ...ctx, snapshot_generation: batch.snapshot_generation || ctx.snapshot_generation },
      span, rpc);
    let reply;
    try {
      const nodes = nodesOf(batch.node_ids, batch.node_names);
      reply = point === 'Filter'
        ? await filterReply(inst, state, pod, nodes, call, cycle.withScores)
        : { scores: await scoresOf(inst, state, pod, nodes, call) };
      if (point === 'Filter') {
        span.setAttribute('outrigger.rejected', reply.codes.filter((c) => c !== Code.Success).length);
      }
    } catch (err) {
      span.recordException(err);
      span.setStatus({ code: tracing.api.SpanStatusCode.ERROR, message: err.message });
      reply = { error: failure(err) };
    }
    span.end();
    reply.batch_seq = batch.batch_seq;
    reply.state_writes = state.drainWrites();
    return reply;
  }
}

function addAmounts(into, delta) {
  for (const [k, v] of Object.entries(delta || {})) into[k] = (Number(into[k]) || 0) + Number(v);
}

/**
 * `infos` (name -> NodeInfo) as seen through a CycleContext.node_view, applied in the contract's
 * order: pods removed, nodes added, pods placed, then node changes in order. Only the nodes it
 * touches are copied.
 */
function applyView(infos, view, generation) {
  if (!view) return infos;
  const out = new Map(infos);
  const copy = (name) => {
    const info = out.get(name);
    if (info === undefined) return undefined;
    const mine = structuredClone(info);
    out.set(name, mine);
    return mine;
  };
  for (const removed of view.removed_pods || []) {
    const info = copy(removed.node_name);
    if (info === undefined) continue;
    const i = (info.pods || []).findIndex((p) => p.ref && p.ref.uid === removed.uid);
    if (i < 0) continue;
    const [gone] = info.pods.splice(i, 1);
    const minus = Object.fromEntries(Object.entries(gone.requests || {}).map(([k, v]) => [k, -Number(v)]));
    addAmounts(info.requested, { ...minus, pods: -1 });
  }
  for (const added of view.added_nodes || []) {
    out.set(added.node.metadata.name, {
      node: added.node, node_id: added.id, requested: {}, non_zero_requested: {}, pods: [], generation,
    });
  }
  for (const pod of view.added_pods || []) {
    const info = copy((pod.spec && pod.spec.node_name) || '');
    if (info === undefined) continue;
    addAmounts(info.requested, { ...pod.requests, pods: 1 });
    info.pods.push({ ref: { uid: pod.metadata.uid, namespace: pod.metadata.namespace, name: pod.metadata.name },
      node_id: info.node_id, node_name: info.node.metadata.name, labels: pod.metadata.labels, requests: pod.requests });
  }
  for (const change of view.changes || []) {
    const info = copy(change.node_name);
    if (info === undefined) continue;
    const { node } = info;
    node.status = node.status || {};
    node.status.allocatable = node.status.allocatable || {};
    addAmounts(node.status.allocatable, change.allocatable);
    info.requested = info.requested || {};
    addAmounts(info.requested, change.requested);
    node.metadata.labels = { ...node.metadata.labels, ...change.labels };
    for (const key of change.remove_labels || []) delete node.metadata.labels[key];
  }
  return out;
}

function checkScores(scores, n, what) {
  if (!Array.isArray(scores) || scores.length !== n) {
    throw new TypeError(`${what} returned ${Array.isArray(scores) ? scores.length : typeof scores} scores for ${n} nodes`);
  }
  for (const s of scores) {
    if (!Number.isInteger(s)) throw new TypeError(`${what} returned a score that is not an integer: ${s}`);
  }
}

/**
 * The PostFilterReply for what postFilter answered. `{status, nominatedNodeName}` is a result
 * (kube-scheduler's PostFilterResult, NOMINATING_MODE_OVERRIDE): its node, '' included, is the pod's
 * nomination from now on, '' clearing it. A Status alone, or an answer without a nominatedNodeName
 * (null or missing), is no result (NOMINATING_MODE_NOOP): the nomination stays as it is.
 */
function postFilterReply(answer) {
  const isResult = answer && typeof answer === 'object' && 'status' in answer;
  const status = toStatus(isResult ? answer.status : answer, 'postFilter');
  const node = isResult ? answer.nominatedNodeName : undefined;
  if (node === undefined || node === null) {
    return { status, nominated_node_name: '', nominating_mode: 'NOMINATING_MODE_NOOP' };
  }
  if (typeof node !== 'string') {
    throw new TypeError(`postFilter returned nominatedNodeName ${JSON.stringify(node)}, not a node name`);
  }
  return { status, nominated_node_name: node, nominating_mode: 'NOMINATING_MODE_OVERRIDE' };
}

async function scoresOf(inst, state, pod, nodes, call) {
  const scores = await inst.score(state, pod, nodes, call);
  checkScores(scores, nodes.length, 'score');
  return scores;
}

async function filterReply(inst, state, pod, nodes, call, withScores) {
  const results = await inst.filter(state, pod, nodes, call);
  if (!Array.isArray(results) || results.length !== nodes.length) {
    throw new TypeError(`filter answered ${Array.isArray(results) ? results.length : typeof results} of ${nodes.length} nodes`);
  }
  const codes = [];
  const reasonIndex = [];
  const table = [];
  const seen = new Map(); // reasons text -> index in table
  for (const r of results) {
    const st = toStatus(r, 'filter');
    codes.push(st.code);
    if (st.code === Code.Success) {
      reasonIndex.push(0);
      continue;
    }
    const text = JSON.stringify(st.reasons);
    let i = seen.get(text);
    if (i === undefined) {
      i = table.length;
      seen.set(text, i);
      table.push({ reasons: st.reasons });
    }
    reasonIndex.push(i);
  }
  const reply = { codes };
  if (table.length) {
    reply.reason_table = table;
    reply.reason_index = reasonIndex;
  }
  if (withScores) {
    const passing = nodes.filter((_, i) => codes[i] === Code.Success);
    const scores = passing.length ? await scoresOf(inst, state, pod, passing, call) : [];
    let j = 0;
    reply.scores = codes.map((c) => (c === Code.Success ? scores[j++] : 0));
  }
  return reply;
}

module.exports = {
  Code,
  CycleState,
  FrameworkClient,
  HEALTH_SERVICE,
  HOST_VERSION,
  PluginDefinitionError,
  PluginHost,
  Status,
  applyView,
  loadProtos,
  manifestOf,
  postFilterReply,
};
