'use strict';
/**
 * Sign (opportunistic batching): Plugin.SignPod for a plugin class with a
 * `signPod(pod, call)` method, which answers what the plugin's Filter and Score answers for the pod
 * depend on, as kube-scheduler 1.37's SignPlugin does:
 *
 *   - an array of fragments, each `[key, value]` (or `{key, value}`): the key names the pod field it
 *     reads ("v1.Pod.Spec.Tolerations"; with "()" naming the processing), the value is anything JSON
 *     can carry. Two pods with equal fragments must get the same answers on the same nodes.
 *   - `null` or a non-success Status: this pod cannot be signed (it is scheduled without batching).
 *
 * A profile batches only when every PreFilter, Filter, PreScore and Score plugin of it signs. Values
 * are sent as canonical JSON (object keys sorted), so equal values are equal bytes.
 */

/** `value` as JSON with object keys sorted at every level. */
function canonicalJson(value) {
  if (value === undefined) return 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
}

/** The SignReply for a signPod answer; a TypeError naming what is wrong for a bad one. */
function signReply(answer, toStatus) {
  if (answer === null || answer === undefined) {
    return { status: { code: 'CODE_UNSCHEDULABLE', reasons: ['the plugin cannot sign this pod'], plugin: '' },
      fragments: [] };
  }
  if (!Array.isArray(answer)) {
    const status = toStatus(answer, 'signPod');
    if (status.code === 'CODE_SUCCESS') {
      throw new TypeError('signPod returned a success Status without fragments: return an array of [key, value]');
    }
    return { status, fragments: [] };
  }
  const fragments = answer.map((f, i) => {
    const [key, value] = Array.isArray(f) ? f : [f && f.key, f && f.value];
    if (typeof key !== 'string' || !key) {
      throw new TypeError(`signPod fragment ${i} has no key: return [key, value] pairs with a non-empty string key`);
    }
    return { key, value_json: Buffer.from(canonicalJson(value)) };
  });
  return { status: { code: 'CODE_SUCCESS', reasons: [], plugin: '' }, fragments };
}

module.exports = { canonicalJson, signReply };
