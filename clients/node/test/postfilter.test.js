'use strict';
// postFilterReply: what a postFilter answer does to the pod's nomination (PostFilterReply.nominating_mode).
const test = require('node:test');
const assert = require('node:assert/strict');
const { Status, postFilterReply } = require('../lib/host');

const unschedulable = Status.unschedulable('no victims');
const success = { code: 'CODE_SUCCESS', reasons: [], plugin: '' };
const rejected = { code: 'CODE_UNSCHEDULABLE', reasons: ['no victims'], plugin: '' };

const cases = [
  // A result nominates its node, or clears the nomination when it names none (kube-scheduler's
  // DefaultPreemption when no node can be made room on).
  ['a result naming a node overrides the nomination', { status: Status.success(), nominatedNodeName: 'n1' },
    { status: success, nominated_node_name: 'n1', nominating_mode: 'NOMINATING_MODE_OVERRIDE' }],
  ['a result naming no node clears the nomination', { status: unschedulable, nominatedNodeName: '' },
    { status: rejected, nominated_node_name: '', nominating_mode: 'NOMINATING_MODE_OVERRIDE' }],
  // No result: the nomination stays as it is.
  ['a status alone is no result', unschedulable,
    { status: rejected, nominated_node_name: '', nominating_mode: 'NOMINATING_MODE_NOOP' }],
  ['nothing returned is no result, and a success', undefined,
    { status: Status.success(), nominated_node_name: '', nominating_mode: 'NOMINATING_MODE_NOOP' }],
  ['an answer without a nominatedNodeName is no result', { status: unschedulable },
    { status: rejected, nominated_node_name: '', nominating_mode: 'NOMINATING_MODE_NOOP' }],
  ['a null nominatedNodeName is no result', { status: unschedulable, nominatedNodeName: null },
    { status: rejected, nominated_node_name: '', nominating_mode: 'NOMINATING_MODE_NOOP' }],
];

for (const [name, answer, want] of cases) {
  test(name, () => {
    assert.deepEqual(postFilterReply(answer), want);
  });
}

test('a nominatedNodeName that is not a string is refused, naming the point', () => {
  assert.throws(() => postFilterReply({ status: Status.success(), nominatedNodeName: 3 }),
    /postFilter returned nominatedNodeName 3, not a node name/);
});
