'use strict';
/**
 * The PodGroup points of the Plugin service (a PodGroup cycle, GenericWorkload with
 * TopologyAwareWorkloadScheduling): GeneratePlacements, ScorePlacement and NormalizePlacementScore,
 * with the shapes of the Python SDK (pluginhost/placement.py). A plugin class implements
 *
 *   generatePlacements(state, group, parent, call)       -> placements | {status, placements}
 *   scorePlacement(state, group, placement, proposed, call) -> integer | {status, score}
 *   normalizePlacementScore(state, group, placements, scores, call) -> Status (scores in place)
 *
 * `group` is {namespace, name, minCount, topologyKeys, pods}: the PodGroup (topologyKeys: the node
 * label keys of its spec.schedulingConstraints.topology, [] when none) and its unscheduled pods in the
 * queue's order (outrigger.v1.Pod objects). A placement is {name, nodes} (node names; `parent` is every node
 * the group may use, and each generated placement's nodes must belong to it); `proposed` are
 * {pod, nodeName}, the group's pods placed on the placement's nodes; `placements` are the names of the
 * placements whose raw scores `scores` holds. `state` is the group cycle's CycleState (the
 * placement's for scorePlacement), keyed by PodGroupContext.group_cycle_id, holding the declared
 * `stateKeys`; writes ride back on the reply. This host does not follow the snapshot mirror, so nodes
 * arrive by name; `await call.nodeInfos()` reads them at the group cycle's snapshot generation.
 */

// What the host shares with this module (set by placementHandlers: host.js requires this file, so
// this file does not require it back).
let CallError;
let Code;
let toStatus;

/** The group of a PodGroupContext, as plugins get it. */
function groupOf(ctx) {
  return {
    namespace: ctx.namespace || '', name: ctx.name || '', minCount: Number(ctx.min_count) || 0,
    topologyKeys: (ctx.topology_keys || []).map(String), pods: ctx.pods || [],
  };
}

/** A placement's node names; the ids alone cannot be resolved here (needs_snapshot is false). */
function placementOf(msg, grpcStatus) {
  const m = msg || {};
  const names = (m.node_names || []).map(String);
  if (!names.length && (m.node_ids || []).length) {
    throw new CallError(grpcStatus.INVALID_ARGUMENT,
      `placement '${m.name || ''}' carries node ids only (this host does not follow the snapshot mirror: it needs names)`);
  }
  return { name: m.name || '', nodes: names };
}

function checkScore(score, what) {
  if (!Number.isInteger(score)) throw new TypeError(`${what} returned a score that is not an integer: ${score}`);
  return score;
}

/** A generatePlacements answer as the reply's status and placements (names checked against the parent). */
function generatedReply(answer, parent) {
  const isResult = answer && !Array.isArray(answer) && typeof answer === 'object' && 'status' in answer;
  const status = toStatus(isResult ? answer.status : null, 'generatePlacements');
  const list = isResult ? (answer.placements || []) : answer;
  if (!Array.isArray(list)) {
    throw new TypeError(`generatePlacements returned ${JSON.stringify(answer)}, not placements [{name, nodes}]`);
  }
  if (status.code !== Code.Success) return { status, placements: [] };
  const allowed = new Set(parent.nodes);
  const placements = list.map((p, i) => {
    if (!p || typeof p !== 'object' || !Array.isArray(p.nodes)) {
      throw new TypeError(`generatePlacements: placement ${i} is ${JSON.stringify(p)}, not {name, nodes: [node names]}`);
    }
    const outside = p.nodes.filter((n) => !allowed.has(n));
    if (outside.length) {
      throw new TypeError(`generatePlacements: placement '${p.name || ''}' names nodes outside its parent: ${outside.slice(0, 5).join(', ')}`);
    }
    return { name: String(p.name || ''), node_names: p.nodes.map(String), node_ids: [] };
  });
  return { status, placements };
}

/**
 * The handlers of the three RPCs. `groupCall(point, req, rpc, cycleId, fn)` runs `fn(inst, state, call)`
 * in the host's cycle-call plumbing (instance, CycleState, span, state writes on the reply); `host` is
 * what the host module shares: CallError, Code and toStatus.
 */
function placementHandlers(unary, groupCall, grpcStatus, host) {
  ({ CallError, Code, toStatus } = host);
  return {
    GeneratePlacements: unary((req, rpc) => groupCall('PlacementGenerate', req, rpc, '', async (inst, state, call) => {
      if (typeof inst.generatePlacements !== 'function') throw new Error('the plugin does not implement PlacementGenerate');
      const parent = placementOf(req.parent, grpcStatus);
      return generatedReply(await inst.generatePlacements(state, groupOf(req.ctx), parent, call), parent);
    })),
    ScorePlacement: unary((req, rpc) => groupCall('PlacementScore', req, rpc, req.placement_cycle_id, async (inst, state, call) => {
      if (typeof inst.scorePlacement !== 'function') throw new Error('the plugin does not implement PlacementScore');
      const group = groupOf(req.ctx);
      const proposed = (req.assignments || []).map((a) => {
        const pod = group.pods[a.pod];
        if (pod === undefined) {
          throw new CallError(grpcStatus.INVALID_ARGUMENT, `assignment names pod ${a.pod} of ${group.pods.length}`);
        }
        return { pod, nodeName: a.node_name || '' };
      });
      const answer = await inst.scorePlacement(state, group, placementOf(req.placement, grpcStatus), proposed, call);
      const isResult = answer && typeof answer === 'object' && 'status' in answer;
      const status = toStatus(isResult ? answer.status : null, 'scorePlacement');
      const score = isResult ? (status.code === Code.Success ? answer.score : 0) : answer;
      return { status, score: checkScore(score === undefined ? 0 : score, 'scorePlacement') };
    })),
    NormalizePlacementScore: unary((req, rpc) => groupCall('NormalizePlacementScore', req, rpc, '', async (inst, state, call) => {
      if (typeof inst.normalizePlacementScore !== 'function') {
        throw new Error('the plugin does not implement NormalizePlacementScore');
      }
      const placements = (req.placements || []).map(String);
      const scores = (req.scores || []).map(Number);
      if (placements.length !== scores.length) {
        throw new CallError(grpcStatus.INVALID_ARGUMENT, `${placements.length} placements for ${scores.length} scores`);
      }
      const status = toStatus(await inst.normalizePlacementScore(state, groupOf(req.ctx), placements, scores, call),
        'normalizePlacementScore');
      if (scores.length !== placements.length) {
        throw new TypeError(`normalizePlacementScore left ${scores.length} scores for ${placements.length} placements`);
      }
      scores.forEach((s) => checkScore(s, 'normalizePlacementScore'));
      return { status, scores };
    })),
  };
}

module.exports = { groupOf, placementHandlers, placementOf };
