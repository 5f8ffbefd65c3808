'use strict';
// The storage mirror of the Node.js host (lib/volumes.js): deltas applied in the contract's order, a
// resync replacing everything, replays skipped, waits bounded; and the needsVolumes declaration.
const test = require('node:test');
const assert = require('node:assert/strict');
const { StorageMirror, VolumeLister } = require('../lib/volumes');
const { manifestOf } = require('../lib/host');

const claim = (name, volume, cls) => ({ persistent_volume_claim: { metadata: { name, namespace: 'ns' }, volume_name: volume, storage_class_name: cls }, object: 'persistent_volume_claim' });
const pv = (name, zone) => ({ persistent_volume: { metadata: { name, labels: { zone } } }, object: 'persistent_volume' });
const sc = (name) => ({ storage_class: { metadata: { name }, provisioner: `p-${name}` }, object: 'storage_class' });

test('deltas add, replace and remove storage objects; a resync replaces them all', () => {
  const m = new StorageMirror();
  m.apply({ generation: 3, full_resync: true, storage_upserts: [claim('data', '', 'fast'), sc('fast')] });
  const l = m.lister();
  assert.equal(l.claim('ns', 'data').volume_name, '');
  m.apply({ generation: 4, storage_upserts: [claim('data', 'pv-1', 'fast'), pv('pv-1', 'a')] });
  assert.deepEqual([l.claim('ns', 'data').volume_name, l.volume('pv-1').metadata.labels.zone], ['pv-1', 'a']);
  m.apply({ generation: 4, storage_removed: [{ kind: 'PersistentVolume', name: 'pv-1' }] }); // a replay: skipped
  assert.notEqual(l.volume('pv-1'), undefined);
  m.apply({ generation: 5, storage_removed: [{ kind: 'PersistentVolume', name: 'pv-1' }, { kind: 'PersistentVolumeClaim', namespace: 'ns', name: 'data' }] });
  assert.deepEqual([l.volume('pv-1'), l.claim('ns', 'data'), l.storageClass('fast').provisioner], [undefined, undefined, 'p-fast']);
  m.apply({ generation: 9, full_resync: true, storage_upserts: [sc('slow')] });
  const again = m.lister();
  assert.deepEqual([again.list('StorageClass').map((c) => c.metadata.name), m.generation, m.resyncs], [['slow'], 9, 2]);
  assert.throws(() => again.list('Pod'), /not a storage kind: Pod/);
});

test('waitFor resolves when the generation is applied and rejects after its timeout', async () => {
  const m = new StorageMirror();
  const waiting = m.waitFor(2, 5000);
  m.apply({ generation: 2, full_resync: true });
  await waiting;
  await assert.rejects(m.waitFor(7, 10), /snapshot generation 7 not reached within 0.01s \(the storage mirror is at generation 2\)/);
});

test('the beta class annotation wins over storage_class_name', () => {
  assert.equal(VolumeLister.classOf({ metadata: { annotations: { 'volume.beta.kubernetes.io/storage-class': 'old' } }, storage_class_name: 'new' }), 'old');
  assert.equal(VolumeLister.classOf({ metadata: {}, storage_class_name: 'new' }), 'new');
});

test('needsVolumes goes to the manifest, and must be a boolean', () => {
  class Reads { static pluginName = 'Reads'; static needsVolumes = true; filter() { return []; } }
  class Bad { static pluginName = 'Bad'; static needsVolumes = 'yes'; filter() { return []; } }
  class Plain { static pluginName = 'Plain'; filter() { return []; } }
  assert.deepEqual([manifestOf(Reads).needs_volumes, manifestOf(Plain).needs_volumes], [true, false]);
  assert.throws(() => manifestOf(Bad), /plugin Bad: needsVolumes must be true or false/);
});
