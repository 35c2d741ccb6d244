/**
 * A store that reports the moment a long poll parks, so a test can wait for
 * it instead of sleeping: after a lease that found nothing the poll reads
 * jobNextDue and parks in the same turn that read resolves. Every other call
 * goes to the store unchanged.
 */

import type { Store } from '../../src/store/store.js';

export function observingLeases(store: Store, onEmptyLease: () => void): Store {
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property === 'jobNextDue') {
        return async (...args: Parameters<Store['jobNextDue']>) => {
          const due = await target.jobNextDue(...args);
          onEmptyLease();
          return due;
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
