'use strict';
/**
 * PodGroupPostFilter (kube-scheduler 1.37's PodGroupPostFilterPlugin: preemption for a group) over
 * the Plugin service's bidirectional stream, for a plugin class with
 *
 *   podGroupPostFilter(state, group, schedule, call) -> Status | {status, nominations, victims}
 *
 * The group could not be placed; the plugin makes it placeable or says why not. `group` is as the
 * other PodGroup points get it (lib/placement.js: {namespace, name, minCount, topologyKeys, pods}),
 * `state` the group cycle's CycleState. `await schedule(removedUids)` asks the framework to schedule
 * the group again in the cycle's snapshot with those pods (by uid) taken out, nothing kept, and
 * resolves to its answer: {status, placement, proposed: [{pod, nodeName}]} (a pod of `group.pods`
 * and its node, '' for not placed); at most PodGroupPostFilterStart.max_schedules asks per call, one
 * at a time. The result, with a success status only:
 *
 *   nominations: [{pod, nodeName}]  the node each pod of the group is nominated to (`pod` a pod of
 *                                   group.pods, or its 'namespace/name')
 *   victims:     [{pod, nodeName}]  pods the framework evicts, told as preempted by the PodGroup
 *                                   (`pod` a PodRef {uid, namespace, name}, a PodPlacement {ref}
 *                                   as call.nodeInfos() lists them, or a Pod)
 *
 * The framework checks each victim against its snapshot. A nominated pod not of the group, a bad
 * victim or a throwing plugin is an Error status; state writes ride on the result.
 */

const { groupOf } = require('./placement');

/** The messages of a server stream, read one at a time; null once it ended (or was cancelled). */
function streamReader(rpc) {
  const queue = [];
  const waiting = [];
  let ended = false;
  const finish = () => {
    ended = true;
    while (waiting.length) waiting.shift()(null);
  };
  rpc.on('data', (msg) => {
    if (waiting.length) waiting.shift()(msg);
    else queue.push(msg);
  });
  rpc.on('end', finish);
  rpc.on('cancelled', finish);
  rpc.on('error', finish);
  return {
    next() {
      if (queue.length) return Promise.resolve(queue.shift());
      if (ended) return Promise.resolve(null);
      return new Promise((resolve) => waiting.push(resolve));
    },
  };
}

function podKey(pod) {
  const meta = (pod && pod.metadata) || {};
  return `${meta.namespace || ''}/${meta.name || ''}`;
}

/** A victim's PodRef from a PodRef, a PodPlacement ({ref}) or a Pod ({metadata}). */
function victimRef(victim, i) {
  const pod = victim && victim.pod;
  const ref = pod && (pod.ref || pod.metadata || pod);
  if (!ref || typeof ref !== 'object' || typeof ref.uid !== 'string' || !ref.uid) {
    throw new TypeError(`podGroupPostFilter: victim ${i} is ${JSON.stringify(victim)}, not {pod: {uid, namespace, name}, nodeName}`);
  }
  const nodeName = victim.nodeName !== undefined ? victim.nodeName : (pod.node_name || '');
  if (typeof nodeName !== 'string' || !nodeName) {
    throw new TypeError(`podGroupPostFilter: victim ${i} (${ref.namespace || ''}/${ref.name || ''}) names no node: set nodeName`);
  }
  return { pod: { uid: ref.uid, namespace: ref.namespace || '', name: ref.name || '' }, node_name: nodeName };
}

/**
 * A podGroupPostFilter answer as the contract's PodGroupPostFilterResult; an Error for a nominated
 * pod not of the group (the message Python's and Go's hosts give).
 */
function resultOf(answer, group, toStatus) {
  const isResult = answer && typeof answer === 'object' && 'status' in answer
    && ('nominations' in answer || 'victims' in answer);
  const status = toStatus(isResult ? answer.status : answer, 'podGroupPostFilter');
  if (!isResult || status.code !== 'CODE_SUCCESS') return { status, nominations: [], victims: [] };
  const index = new Map(group.pods.map((p, i) => [podKey(p), i]));
  const nominations = (answer.nominations || []).map((a, i) => {
    const key = typeof (a && a.pod) === 'string' ? a.pod : podKey(a && a.pod);
    if (!index.has(key)) {
      throw new Error(`nominated pod ${key} is not an unscheduled pod of pod group ${group.namespace}/${group.name}`);
    }
    if (typeof a.nodeName !== 'string' || !a.nodeName) {
      throw new TypeError(`podGroupPostFilter: nomination ${i} (${key}) names no node: set nodeName`);
    }
    return { pod: index.get(key), node_name: a.nodeName };
  });
  const victims = (answer.victims || []).map(victimRef);
  return { status, nominations, victims };
}

/** `schedule` for one call: each ask written on the stream, the framework's answer read back. */
function scheduler(rpc, reader, start, group, toStatus) {
  const max = Number(start.max_schedules) || 0;
  let asks = 0;
  return async (removedUids = []) => {
    if (!Array.isArray(removedUids) || !removedUids.every((u) => typeof u === 'string' && u)) {
      throw new TypeError(`schedule takes the uids of the pods to take out, got ${JSON.stringify(removedUids)}`);
    }
    asks += 1;
    if (asks > max) {
      throw new Error(`the group may be scheduled again at most ${max} times in one PodGroupPostFilter`);
    }
    rpc.write({ schedule: { removed_pods: removedUids.map((uid) => ({ uid })) } });
    const msg = await reader.next();
    if (msg === null || msg.msg !== 'scheduled') {
      throw new Error('the framework ended the PodGroupPostFilter stream before answering');
    }
    const got = msg.scheduled;
    const proposed = (got.assignments || []).filter((a) => a.pod < group.pods.length)
      .map((a) => ({ pod: group.pods[a.pod], nodeName: a.node_name || '' }));
    return { status: toStatus(got.status, 'the framework'), placement: got.placement || '', proposed };
  };
}

/**
 * The handler of the stream. `groupCall(point, req, rpc, cycleId, fn)` is the host's PodGroup call
 * plumbing (instance, CycleState, span, state writes on the reply); `host` shares CallError and
 * toStatus.
 */
function groupFilterHandler(groupCall, grpcStatus, host) {
  const { CallError, toStatus } = host;
  return (rpc) => {
    const reader = streamReader(rpc);
    const fail = (code, details) => rpc.emit('error', { code, details });
    (async () => {
      const first = await reader.next();
      if (first === null || first.msg !== 'start') {
        fail(grpcStatus.INVALID_ARGUMENT, 'a PodGroupPostFilter stream must start with PodGroupPostFilterStart');
        return;
      }
      const { start } = first;
      const result = await groupCall('PodGroupPostFilter', start, rpc, '', async (inst, state, call) => {
        if (typeof inst.podGroupPostFilter !== 'function') throw new Error('the plugin does not implement PodGroupPostFilter');
        const group = groupOf(start.ctx || {});
        const schedule = scheduler(rpc, reader, start, group, toStatus);
        return resultOf(await inst.podGroupPostFilter(state, group, schedule, call), group, toStatus);
      });
      if (rpc.cancelled) return;
      rpc.write({ result });
      rpc.end();
    })().catch((err) => {
      if (!rpc.cancelled) fail(err instanceof CallError ? err.code : grpcStatus.INTERNAL, (err && err.message) || String(err));
    });
  };
}

module.exports = { groupFilterHandler };
