'use strict';
/**
 * PoolFit: keeps a pod on nodes of its pool, and lets identical pods batch.
 *
 *   metadata:
 *     labels:
 *       pool: a                                   # only nodes labelled pool=a
 *     annotations:
 *       example.outrigger.io/unsignable: "true"   # (optional) never batch this pod
 *
 * - Filter passes the nodes whose `pool` label is the pod's (a pod without one fits nodes without
 *   one), rejecting the others as UnschedulableAndUnresolvable.
 * - signPod (opportunistic batching, lib/sign.js): the pod's pool is all Filter reads of it, so it is
 *   the pod's one fragment. With every other plugin of the profile signing too, a pod identical to the
 *   one scheduled just before it is offered that pod's next-best node. A pod annotated unsignable
 *   answers null: it is scheduled on its own.
 */

const { Status } = require('../lib/host');

const UNSIGNABLE = 'example.outrigger.io/unsignable';

class PoolFit {
  static pluginName = 'PoolFit';

  async filter(state, pod, nodes, call) {
    const pool = ((pod.metadata || {}).labels || {}).pool || '';
    const infos = await call.nodeInfos();
    return nodes.map((n) => {
      const info = infos.get(n.name);
      const labels = (info && info.node.metadata.labels) || {};
      return (labels.pool || '') === pool ? null : Status.unresolvable('node(s) are in another pool');
    });
  }

  signPod(pod) {
    const meta = pod.metadata || {};
    if ((meta.annotations || {})[UNSIGNABLE]) return null;
    return [['v1.Pod.Labels[pool]', (meta.labels || {}).pool || '']];
  }
}

module.exports = { PoolFit, UNSIGNABLE };
