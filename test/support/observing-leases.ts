/**
 * A store that reports the moment a long poll parks, so a test can wait for
 * it instead of sleeping: a poll whose lease found nothing parks in the same
 * turn that jobLeaseWithNextDue resolves. Every other call goes to the store
 * unchanged.
 */

import type { Store } from '../../src/store/store.js';

export function observingLeases(store: Store, onEmptyLease: () => void): Store {
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property === 'jobLeaseWithNextDue') {
        return async (...args: Parameters<Store['jobLeaseWithNextDue']>) => {
          const answer = await target.jobLeaseWithNextDue(...args);
          if (answer.jobs.length === 0) onEmptyLease();
          return answer;
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
