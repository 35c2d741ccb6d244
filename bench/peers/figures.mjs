/**
 * What the peer scripts share: order statistics, the clock latency is
 * measured by, and the figures of several runs collected by name and printed
 * as medians the way bench/run.ts prints leasehold's. Plain JavaScript, so a
 * peer runs without building the project.
 */

/** The host's monotonic clock in ms, which every process on the host reads alike (bench/host-clock.ts says why). */
export function hostClockMs() {
  return Number(process.hrtime.bigint()) / 1e6;
}

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const digitsOf = (name) => (name.includes('latency') ? 2 : 0);

/** Figures by name over the runs: `record` prints each as it comes, `printMedians` the medians at the end. */
export function runFigures() {
  const figures = {};
  return {
    record(name, value) {
      (figures[name] ??= []).push(value);
      console.log(`  ${name}: ${value.toFixed(digitsOf(name))}`);
    },
    printMedians(title) {
      console.log(title);
      for (const [name, values] of Object.entries(figures)) {
        const digits = digitsOf(name);
        console.log(`  ${name.padEnd(24)} ${median(values).toFixed(digits)}   (runs: ${values.map((v) => v.toFixed(digits)).join(', ')})`);
      }
      // The medians by name on one line, for bench/compare.ts, which reads the last such line.
      console.log(`figures ${JSON.stringify(Object.fromEntries(Object.entries(figures).map(([name, values]) => [name, median(values)])))}`);
    },
  };
}
