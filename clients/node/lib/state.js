'use strict';
/**
 * The CycleState a plugin sees during one call (or one cycle of a Filter/Score stream).
 *
 * CycleState lives in the framework, keyed by cycle id. The entries of the keys a plugin declares
 * (`static stateKeys`) arrive with every request (CycleContext.state); what the plugin writes is
 * sent back on its reply (`state_writes`) and applied by the framework, so neither costs a round
 * trip. Keys the plugin did not declare are read with `await state.fetch(key)`, which asks the
 * framework's CycleState service (the slow path).
 *
 * Values are bytes tagged with a content type (outrigger.v1.StateEntry), so plugins in any language
 * share them. `getJson`/`setJson` use "application/json" with compact JSON and sorted keys, the
 * same bytes Python's `StateValue.json` produces.
 */

const JSON_TYPE = 'application/json';

/** Compact JSON with sorted object keys and non-ASCII escaped (Python's json.dumps(sort_keys=True)). */
function canonicalJson(value) {
  const sort = (v) => {
    if (Array.isArray(v)) return v.map(sort);
    if (v !== null && typeof v === 'object') {
      return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort(v[k])]));
    }
    return v;
  };
  return JSON.stringify(sort(value)).replace(/[\u0080-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

class CycleState {
  /**
   * @param {string} cycleId CycleContext.cycle_id
   * @param {string} plugin the plugin's name (the caller identity of slow-path reads)
   * @param {string[]} declared the plugin's stateKeys
   * @param {{key: string, content_type: string, value: Buffer}[]} entries CycleContext.state
   * @param {import('./host').FrameworkClient|null} framework for the slow path
   */
  constructor(cycleId, plugin, declared, entries, framework) {
    this.cycleId = cycleId;
    this.plugin = plugin;
    this._declared = new Set(declared);
    this._framework = framework;
    this._data = new Map();
    this._writes = new Map(); // key -> entry, or null for a delete
    for (const e of entries) this._data.set(e.key, { contentType: e.content_type, value: Buffer.from(e.value) });
  }

  /** Whether `key` holds a value (among the entries sent with the request and this call's writes). */
  has(key) {
    return this._data.has(key);
  }

  /** `{contentType, value: Buffer}` of `key`, or undefined (sent entries and this call's writes). */
  get(key) {
    return this._data.get(key);
  }

  /** The value of `key` decoded as JSON, or `fallback` when it is absent. */
  getJson(key, fallback = undefined) {
    const v = this._data.get(key);
    return v === undefined ? fallback : JSON.parse(v.value.toString('utf8'));
  }

  /**
   * The value of any key, asking the framework's CycleState service for one that was neither sent
   * nor written here (a round trip). A declared key that was not sent does not exist.
   */
  async fetch(key) {
    if (this._data.has(key) || this._declared.has(key) || this._writes.has(key)) return this._data.get(key);
    if (this._framework === null || !this.cycleId) return undefined;
    const entries = await this._framework.readState(this.cycleId, this.plugin, [key]);
    for (const e of entries) {
      if (e.key === key) {
        const v = { contentType: e.content_type, value: Buffer.from(e.value) };
        this._data.set(key, v);
        return v;
      }
    }
    return undefined;
  }

  /** Writes `key` (sent back on the reply). `value` is a Buffer or a string (UTF-8). */
  set(key, value, contentType = '') {
    if (typeof key !== 'string' || !key) throw new TypeError('a cycle state key must be a non-empty string');
    const buf = Buffer.isBuffer(value) ? value : Buffer.from(String(value), 'utf8');
    const v = { contentType, value: buf };
    this._data.set(key, v);
    this._writes.set(key, v);
  }

  /** Writes `value` as JSON under `key`. */
  setJson(key, value) {
    this.set(key, canonicalJson(value), JSON_TYPE);
  }

  /** Deletes `key` (the delete is sent back on the reply). */
  delete(key) {
    this._data.delete(key);
    this._writes.set(key, null);
  }

  /** The writes since the last drain, as StateEntry messages (deletes flagged). */
  drainWrites() {
    const out = [];
    for (const [key, v] of this._writes) {
      out.push(v === null ? { key, deleted: true } : { key, content_type: v.contentType, value: v.value });
    }
    this._writes.clear();
    return out;
  }
}

module.exports = { CycleState, JSON_TYPE, canonicalJson };
