/**
 * A store that reports each lease attempt that found nothing: the moment a
 * long poll parks, so a test can wait for it instead of sleeping. Every
 * other call goes to the store unchanged.
 */

import type { Store } from '../../src/store/store.js';

export function observingLeases(store: Store, onEmptyLease: () => void): Store {
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property === 'jobLease') {
        return async (...args: Parameters<Store['jobLease']>) => {
          const jobs = await target.jobLease(...args);
          if (jobs.length === 0) onEmptyLease();
          return jobs;
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
