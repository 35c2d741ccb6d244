/**
 * What a PostgreSQL store's listener knows of the other listeners on its schema (listener-peers.ts): a store
 * skips its NOTIFYs only while a census has found no other listener and no hello has come since.
 */

import { describe, expect, it } from 'vitest';
import { encodeAck, encodeHello, ListenerPeers, listenerName, parseControl } from '../../src/store/postgres/listener-peers.js';

describe('a listener’s knowledge of the others', () => {
  it('assumes company until a census finds none', () => {
    const peers = new ListenerPeers();
    expect(peers.othersMayListen()).toBe(true);
    peers.counted(peers.censusStarted(), 0);
    expect(peers.othersMayListen()).toBe(false);
    peers.counted(peers.censusStarted(), 2);
    expect(peers.othersMayListen()).toBe(true);
  });

  it('is not alone once it hears a hello, even when an older census answers “none” after it', () => {
    const peers = new ListenerPeers();
    peers.counted(peers.censusStarted(), 0);
    const token = peers.censusStarted();
    peers.heardHello();
    peers.counted(token, 0);
    expect(peers.othersMayListen()).toBe(true);
    // A census begun after the hello counts.
    peers.counted(peers.censusStarted(), 0);
    expect(peers.othersMayListen()).toBe(false);
  });

  it('is not alone while its connection is down (it hears no hello), nor by a census begun before the drop', () => {
    const peers = new ListenerPeers();
    const token = peers.censusStarted();
    peers.deaf();
    peers.counted(token, 0);
    expect(peers.othersMayListen()).toBe(true);
  });
});

describe('control messages', () => {
  it('read back what they say', () => {
    expect(parseControl(encodeHello('abc'))).toEqual({ hello: 'abc' });
    expect(parseControl(encodeAck('abc', 'def'))).toEqual({ ack: 'abc', from: 'def' });
  });

  it('are not mistaken for the channels’ own payloads, nor those for them', () => {
    for (const payload of ['', '*', '["t","k"]', '["t","k","o"]', '{"t":"t","i":"1","o":"o"}', '{"lh":"hello"}', '{"lh":"ack","o":"x"}', '{"lh":', undefined]) {
      expect(parseControl(payload)).toBeNull();
    }
  });

  it('name the listening connections of a schema within PostgreSQL’s 63 bytes', () => {
    expect(listenerName('lh_abc')).toBe('lh-listen:lh_abc');
    expect(listenerName('s'.repeat(63))).toHaveLength(63);
  });
});
