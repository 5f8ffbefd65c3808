'use strict';
/**
 * TierZone: keeps pods on nodes of their tier and prefers the zones they list.
 *
 *   metadata:
 *     labels:
 *       example.com/tier: gold                            # only nodes labelled example.com/tier=gold
 *     annotations:
 *       example.com/preferred-zones: "zone-b,zone-a"      # zone-b first, then zone-a
 *
 * - PreFilter reads the pod's tier label and zone annotation once per cycle and writes them to
 *   CycleState under "TierZone/want" (JSON {"tier": ..., "zones": [...]}). The key is declared in
 *   `stateKeys`, so the framework sends it with the Filter and Score requests of the cycle: the host
 *   keeps nothing between calls, and other plugins (in any language) can read it too. A pod with
 *   neither gets Skip, and its Filter is not called.
 * - Filter rejects nodes whose tier label differs (UnschedulableAndUnresolvable: preemption cannot
 *   change a label), with the reason "node(s) didn't have label example.com/tier=gold".
 * - Score gives a node in the i-th of n preferred zones floor(100 * (n - i) / n): with
 *   "zone-b,zone-a", zone-b scores 100, zone-a 50, any other zone 0.
 *
 * Node labels come from the framework's Handle service (ListNodeInfos at the batch's snapshot
 * generation, fetched once per generation by the host and shared by every call), with the request's
 * node view applied (what-if nodes, labels changed by transformers).
 *
 * Args (pluginConfig): tierLabel (default "example.com/tier"), zoneLabel (default
 * "topology.kubernetes.io/zone"), zonesAnnotation (default "example.com/preferred-zones").
 */

const { Status } = require('../lib/host');

const WANT = 'TierZone/want';
const DEFAULTS = Object.freeze({
  tierLabel: 'example.com/tier',
  zoneLabel: 'topology.kubernetes.io/zone',
  zonesAnnotation: 'example.com/preferred-zones',
});
const MAX_SCORE = 100;

class TierZone {
  static pluginName = 'TierZone';
  static stateKeys = [WANT];

  constructor(args = {}) {
    for (const [key, value] of Object.entries(args)) {
      if (!(key in DEFAULTS)) {
        throw new Error(`unknown TierZone arg '${key}' (allowed: ${Object.keys(DEFAULTS).join(', ')})`);
      }
      if (typeof value !== 'string' || !value) throw new Error(`TierZone arg '${key}' must be a non-empty string`);
    }
    Object.assign(this, DEFAULTS, args);
  }

  preFilter(state, pod) {
    const meta = pod.metadata || {};
    const tier = (meta.labels || {})[this.tierLabel] || '';
    const zones = ((meta.annotations || {})[this.zonesAnnotation] || '')
      .split(',').map((z) => z.trim()).filter(Boolean);
    if (!tier && !zones.length) return Status.skip();
    state.setJson(WANT, { tier, zones });
    return Status.success();
  }

  async filter(state, pod, nodes, call) {
    const { tier } = state.getJson(WANT, { tier: '' });
    if (!tier) return nodes.map(() => null);
    const labels = await nodeLabels(call);
    const reason = `node(s) didn't have label ${this.tierLabel}=${tier}`;
    return nodes.map((n) => ((labels.get(n.name) || {})[this.tierLabel] === tier ? null : Status.unresolvable(reason)));
  }

  async score(state, pod, nodes, call) {
    const { zones } = state.getJson(WANT, { zones: [] });
    if (!zones.length) return nodes.map(() => 0);
    const labels = await nodeLabels(call);
    return nodes.map((n) => {
      const i = zones.indexOf((labels.get(n.name) || {})[this.zoneLabel]);
      return i < 0 ? 0 : Math.floor((MAX_SCORE * (zones.length - i)) / zones.length);
    });
  }
}

async function nodeLabels(call) {
  const infos = await call.nodeInfos();
  return new Map([...infos].map(([name, info]) => [name, info.node.metadata.labels || {}]));
}

module.exports = { TierZone, WANT };
