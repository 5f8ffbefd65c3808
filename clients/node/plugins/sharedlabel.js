'use strict';
/**
 * SharedLabelPlacement: a PlacementScore plugin (a PodGroup cycle with TopologyAwareWorkloadScheduling)
 * that prefers placements whose proposed nodes share one value of a node label, the Node.js twin of
 * the Python example (pluginhost/examples/sharedlabel.py), answer for answer.
 *
 * For each placement in which the whole group fits, scorePlacement gives
 * floor(100 * pods on the most common value of the label / pods placed) (a pod on a node without the
 * label counts for no value). With `label: power-domain`, a group spread over two power domains
 * scores 50; one inside a single domain scores 100. Node labels come from the framework's Handle
 * service at the group cycle's snapshot generation.
 *
 * Args (pluginConfig): label (required), the node label key.
 */

const MAX_SCORE = 100;

class SharedLabelPlacement {
  static pluginName = 'SharedLabelPlacement';

  constructor(args = {}) {
    for (const key of Object.keys(args)) {
      if (key !== 'label') throw new Error(`unknown SharedLabelPlacement arg '${key}' (allowed: label)`);
    }
    if (typeof args.label !== 'string' || !args.label) {
      throw new Error(`SharedLabelPlacement: args.label must be a non-empty node label key, got ${JSON.stringify(args.label)}`);
    }
    this.label = args.label;
  }

  async scorePlacement(state, group, placement, proposed, call) {
    if (!proposed.length) return 0;
    const infos = await call.nodeInfos();
    const counts = new Map();
    for (const { nodeName } of proposed) {
      const info = infos.get(nodeName);
      const value = info ? (info.node.metadata.labels || {})[this.label] : undefined;
      if (value !== undefined) counts.set(value, (counts.get(value) || 0) + 1);
    }
    const top = Math.max(0, ...counts.values());
    return Math.floor((MAX_SCORE * top) / proposed.length);
  }
}

module.exports = { SharedLabelPlacement };
