'use strict';
/**
 * Device objects for Node.js plugins: the ResourceSlices, DeviceClasses and ResourceClaims of the
 * framework's cache (dynamic resource allocation), followed through the snapshot mirror stream
 * (Handle.FollowSnapshot with `devices: true`) by a host with a plugin declaring
 * `static needsDevices = true`. Claims come as the scheduler sees them: one that an earlier pod's
 * Reserve allocated is allocated already, with `allocation_assumed` true, so a plugin counts its
 * devices as taken, as DynamicResources does.
 *
 * Objects are the decoded outrigger.v1 messages (keepCase field names: `metadata.name`, `driver`,
 * `pool`, `devices[].attributes`, `allocation.results`...). A device attribute is a message whose
 * `value` names the field that is set (`int`, `bool`, `string` or `version`); `attributeValue()`
 * unwraps it. Quantities are decimal strings in canonical units.
 */

const KINDS = Object.freeze({
  ResourceSlice: 'resource_slice',
  DeviceClass: 'device_class',
  ResourceClaim: 'resource_claim',
});
const FIELD_KIND = Object.fromEntries(Object.entries(KINDS).map(([kind, field]) => [field, kind]));

function keyOf(kind, meta) {
  return kind === 'ResourceClaim' ? `${meta.namespace || ''}/${meta.name || ''}` : meta.name || '';
}

/** The plain value of a DeviceAttribute message (undefined for none). */
function attributeValue(attr) {
  if (attr === undefined || attr === null || !attr.value) return undefined;
  return attr[attr.value];
}

function requirementMatches(req, value) {
  const values = req.values || [];
  switch (req.operator) {
    case 'Exists': return value !== undefined;
    case 'DoesNotExist': return value === undefined;
    case 'In': return value !== undefined && values.includes(value);
    case 'NotIn': return value !== undefined && !values.includes(value);
    case 'Gt':
    case 'Lt': {
      if (value === undefined || values.length !== 1) return false;
      const have = Number.parseInt(value, 10);
      const want = Number.parseInt(values[0], 10);
      if (Number.isNaN(have) || Number.isNaN(want)) return false;
      return req.operator === 'Gt' ? have > want : have < want;
    }
    default: return false;
  }
}

/** Whether `node` (an outrigger.v1.Node) matches the NodeSelector `selector` (one of its terms). */
function nodeSelectorMatches(selector, node) {
  const labels = (node.metadata || {}).labels || {};
  const name = (node.metadata || {}).name || '';
  return (selector.terms || []).some((term) => {
    const exprs = term.match_expressions || [];
    const fields = term.match_fields || [];
    if (!exprs.length && !fields.length) return false;
    return exprs.every((r) => requirementMatches(r, labels[r.key]))
      && fields.every((r) => requirementMatches(r, r.key === 'metadata.name' ? name : undefined));
  });
}

function onNode(node, nodeName, allNodes, selector) {
  if (nodeName) return nodeName === ((node.metadata || {}).name || '');
  if (allNodes) return true;
  return selector !== undefined && selector !== null && nodeSelectorMatches(selector, node);
}

const idOf = (driver, pool, device) => `${driver}/${pool}/${device}`;

/** What a plugin reads: the device objects by key, plus the per-node views a scorer needs. */
class DeviceLister {
  constructor(stores) {
    this._stores = stores;
  }

  /** The ResourceSlice name, or undefined. */
  slice(name) {
    return this._stores.ResourceSlice.get(name);
  }

  /** The DeviceClass name, or undefined. */
  deviceClass(name) {
    return this._stores.DeviceClass.get(name);
  }

  /** The ResourceClaim namespace/name, or undefined. */
  claim(namespace, name) {
    return this._stores.ResourceClaim.get(`${namespace}/${name}`);
  }

  /** Every object of kind ('ResourceSlice', 'DeviceClass', 'ResourceClaim'), by key. */
  list(kind) {
    const store = this._stores[kind];
    if (store === undefined) throw new Error(`not a device kind: ${kind} (one of ${Object.keys(KINDS).join(', ')})`);
    return [...store.keys()].sort().map((k) => store.get(k));
  }

  /**
   * `[{ entry, claim }]` for each of the pod's spec.resource_claims in order: the claim named
   * directly, or the one made from a template (status.resource_claim_statuses); claim undefined when
   * not (yet) known.
   */
  podClaims(pod) {
    const meta = pod.metadata || {};
    const statuses = (pod.status || {}).resource_claim_statuses || {};
    return ((pod.spec || {}).resource_claims || []).map((e) => {
      const name = e.resource_claim_name || statuses[e.name] || '';
      return { entry: e.name, claim: name ? this.claim(meta.namespace || '', name) : undefined };
    });
  }

  /** The slices of each pool's newest generation (older ones are being replaced and do not count). */
  currentSlices() {
    const slices = this.list('ResourceSlice');
    const newest = new Map();
    for (const s of slices) {
      const key = `${s.driver}/${s.pool}`;
      newest.set(key, Math.max(newest.has(key) ? newest.get(key) : -Infinity, Number(s.pool_generation) || 0));
    }
    return slices.filter((s) => (Number(s.pool_generation) || 0) === newest.get(`${s.driver}/${s.pool}`));
  }

  /** `[{ id, slice, device }]`: every device of the current slices usable on `node`, by slice name. */
  nodeDevices(node) {
    const out = [];
    for (const s of this.currentSlices()) {
      const perDevice = s.per_device_node_selection;
      if (!perDevice && !onNode(node, s.node_name, s.all_nodes, s.node_selector)) continue;
      for (const d of s.devices || []) {
        if (perDevice && !onNode(node, d.node_name, d.all_nodes, d.node_selector)) continue;
        out.push({ id: idOf(s.driver, s.pool, d.name), slice: s, device: d });
      }
    }
    return out;
  }

  /** Map of device id 'driver/pool/device' -> the claims allocated it (assumed allocations included; admin access not). */
  allocated() {
    const out = new Map();
    for (const c of this.list('ResourceClaim')) {
      for (const r of (c.allocation || {}).results || []) {
        if (r.admin_access) continue;
        const id = idOf(r.driver, r.pool, r.device);
        if (!out.has(id)) out.set(id, []);
        out.get(id).push(c);
      }
    }
    return out;
  }

  /** The devices usable on `node` that some claim holds. */
  inUseOnNode(node) {
    const taken = this.allocated();
    return this.nodeDevices(node).filter((d) => taken.has(d.id));
  }

  /** The devices usable on `node` that no claim holds (shared devices count as free). */
  freeOnNode(node) {
    const taken = this.allocated();
    return this.nodeDevices(node).filter((d) => !taken.has(d.id) || d.device.allow_multiple_allocations);
  }
}

/** The device objects of the framework's cache as the stream brought them, with its generation. */
class DeviceMirror {
  constructor() {
    this.generation = 0;
    this.resyncs = 0;
    this.reset();
  }

  reset() {
    this.generation = 0;
    this._stores = Object.fromEntries(Object.keys(KINDS).map((k) => [k, new Map()]));
  }

  /** The objects, live: the lister always reads the latest applied state. */
  lister() {
    return new DeviceLister(this._stores);
  }

  /** Applies one SnapshotDelta's device changes (a resync first empties the stores). */
  apply(delta) {
    const generation = Number(delta.generation) || 0;
    if (delta.full_resync) {
      this.reset();
      this.resyncs++;
    } else if (generation <= this.generation) {
      return; // already applied (a replay after a reconnect)
    }
    for (const ref of delta.device_removed || []) {
      const store = this._stores[ref.kind];
      if (store !== undefined) store.delete(keyOf(ref.kind, ref));
    }
    for (const obj of delta.device_upserts || []) {
      const kind = FIELD_KIND[obj.object];
      if (kind === undefined) continue;
      const value = obj[obj.object];
      this._stores[kind].set(keyOf(kind, value.metadata || {}), value);
    }
    this.generation = generation;
  }
}

module.exports = { DeviceLister, DeviceMirror, attributeValue, nodeSelectorMatches };
