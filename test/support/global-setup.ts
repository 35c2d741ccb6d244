/** Repeats the PostgreSQL decision (see postgres-probe.ts) after the run, where a skip cannot scroll by unseen. */
import { POSTGRES_NOTE_VARIABLE } from './postgres-probe.js';

export default function setup(): () => void {
  return () => {
    const note = process.env[POSTGRES_NOTE_VARIABLE];
    // Each vitest project runs this teardown; print once.
    if (note === undefined || process.env['LEASEHOLD_POSTGRES_NOTE_PRINTED'] === '1') return;
    process.env['LEASEHOLD_POSTGRES_NOTE_PRINTED'] = '1';
    console.log(`\n${note}\n`);
  };
}
