'use strict';
/**
 * EvictLower: a PodGroupPostFilter plugin (preemption for a group, GenericWorkload) as simple as it
 * can be, the Node.js twin of the Python one in tests/groupfilter_plugins.py, answer for answer.
 *
 * When a group cannot be placed, every pod of the snapshot below the group's priority (its highest
 * pod's) is taken out, and the framework is asked once to schedule the group without them. If the
 * group then fits, those pods are the victims (the framework evicts them, told as preempted by the
 * PodGroup) and each pod of the group is nominated to the node that run placed it on. Nothing of
 * lower priority: UnschedulableAndUnresolvable; the group does not fit even so: Unschedulable.
 * Pods on nodes come from the framework's Handle service at the group cycle's snapshot generation.
 * It takes no args.
 */

const { Status, Code } = require('../lib/host');

class EvictLower {
  static pluginName = 'EvictLower';

  constructor(args = {}) {
    const keys = Object.keys(args);
    if (keys.length) throw new Error(`EvictLower takes no args, got ${keys.join(', ')}`);
  }

  async podGroupPostFilter(state, group, schedule, call) {
    const priority = Math.max(...group.pods.map((p) => Number((p.spec || {}).priority) || 0));
    const infos = await call.nodeInfos();
    const lower = [...infos.values()].flatMap((info) => info.pods || [])
      .filter((p) => Number(p.priority) < priority)
      .sort((a, b) => (a.ref.name < b.ref.name ? -1 : a.ref.name > b.ref.name ? 1 : 0));
    if (!lower.length) return Status.unresolvable('EvictLower: nothing of lower priority');
    const got = await schedule(lower.map((p) => p.ref.uid));
    if (got.status.code !== Code.Success) {
      return Status.unschedulable(`EvictLower: the group does not fit even so: ${got.status.reasons.join(', ')}`);
    }
    return {
      status: { code: Code.Success, reasons: [`EvictLower: preempting ${lower.length} pods`] },
      nominations: got.proposed.filter((a) => a.nodeName),
      victims: lower.map((p) => ({ pod: p.ref, nodeName: p.node_name })),
    };
  }
}

module.exports = { EvictLower };
