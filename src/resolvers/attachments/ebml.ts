import { badInput } from '../../errors.js';
import type { IsoMovie } from './iso-boxes.js';

/**
 * "A video must be a video", for WebM and Matroska (EBML): the four magic bytes are only a claim,
 * as `ftyp` is for MP4 (iso-boxes.ts). Checked while the bytes pass: the file must be an EBML
 * header naming `webm` or `matroska`, then one Segment holding elements whose sizes chain to the
 * last byte (a Segment or Cluster of unknown size, as browsers' MediaRecorder writes them, runs to
 * the end of the file), with a Tracks element declaring a track: type 1 (video) → `vide`,
 * type 2 (audio) → `soun`, the handlers the kind is then checked against. Only element headers,
 * the EBML header and Tracks (at most MAX_TRACKS_BYTES) are read; the rest is only counted.
 */

const EBML_HEADER = 0x1a45dfa3;
const DOC_TYPE = 0x4282;
const SEGMENT = 0x18538067;
const TRACKS = 0x1654ae6b;
const TRACK_ENTRY = 0xae;
const TRACK_TYPE = 0x83;
const CLUSTER = 0x1f43b675;
const MAX_HEADER_BYTES = 4096;
const MAX_TRACKS_BYTES = 1024 * 1024;

const notMovie = (why: string) => badInput(`The file is not a valid WebM/Matroska movie: ${why}`);

/** A variable-length integer at `at`: its length and value (`unknown` when every value bit is 1). */
function vint(b: Buffer, at: number, maxLength: number, keepMarker: boolean) {
  if (at >= b.length) return { length: 1, value: 0, unknown: false, short: true };
  const first = b[at] ?? 0;
  let length = 1;
  while (length <= 8 && !(first & (0x80 >> (length - 1)))) length++;
  if (length > maxLength) return undefined;
  if (at + length > b.length) return { length, value: 0, unknown: false, short: true };
  let value = keepMarker ? first : first & (0xff >> length);
  let allOnes = value === 0xff >> length;
  for (let i = 1; i < length; i++) {
    const byte = b[at + i] ?? 0;
    value = value * 256 + byte;
    allOnes &&= byte === 0xff;
  }
  return { length, value, unknown: !keepMarker && allOnes, short: false };
}

/** An element header at `at` of `b`: id, size (or unknown), header length; `short` when `b` ends inside it. */
function elementHeader(b: Buffer, at: number) {
  const id = vint(b, at, 4, true);
  if (!id) throw notMovie('an element has no valid id');
  if (id.short) return { short: true as const };
  const size = vint(b, at + id.length, 8, false);
  if (!size) throw notMovie('an element has no valid size');
  if (size.short) return { short: true as const };
  return {
    short: false as const,
    id: id.value,
    size: size.unknown ? undefined : size.value,
    length: id.length + size.length,
  };
}

export class EbmlWalker {
  private pos = 0;
  /** Offset where the element being skipped or collected ends. */
  private next = 0;
  private header = Buffer.alloc(0);
  private stage: 'ebml' | 'segment' | 'inside' = 'ebml';
  private collecting?: { id: number; parts: Buffer[] };
  /** The known end of the Segment, or Infinity (unknown size: to the end of the file). */
  private segmentEnd = Number.POSITIVE_INFINITY;
  /** An element of unknown size (the Segment, a Cluster) runs to the end of the file at most. */
  private readonly handlers = new Set<string>();
  private sawTracks = false;

  push(chunk: Buffer) {
    let i = 0;
    while (i < chunk.length) {
      if (this.pos < this.next) {
        const n = Math.min(chunk.length - i, this.next - this.pos);
        this.collecting?.parts.push(Buffer.from(chunk.subarray(i, i + n)));
        this.pos += n;
        i += n;
        if (this.pos === this.next && this.collecting) this.finishCollected();
        continue;
      }
      // Headers are at most 12 bytes (4 of id, 8 of size): read byte by byte until one parses.
      this.header = Buffer.concat([this.header, chunk.subarray(i, i + 1)]);
      this.pos++;
      i++;
      const parsed = elementHeader(this.header, 0);
      if (parsed.short) continue;
      this.header = Buffer.alloc(0);
      this.open(parsed.id, parsed.size);
    }
  }

  private open(id: number, size: number | undefined) {
    if (this.pos > this.segmentEnd) throw notMovie('an element lies outside the segment');
    if (this.stage === 'ebml') {
      if (id !== EBML_HEADER || size === undefined || size > MAX_HEADER_BYTES)
        throw notMovie('it does not start with an EBML header');
      this.stage = 'segment';
      return this.collect(id, size);
    }
    if (this.stage === 'segment') {
      if (id !== SEGMENT) throw notMovie('its EBML header is not followed by a segment');
      this.stage = 'inside';
      if (size !== undefined) this.segmentEnd = this.pos + size;
      return; // its children follow
    }
    if (size === undefined) {
      // Only a cluster may have an unknown size inside the segment: its children follow.
      if (id !== CLUSTER) throw notMovie('an element other than a cluster has an unknown size');
      return;
    }
    if (id === CLUSTER) return; // a cluster of known size: its children follow as well
    if (id === TRACKS) {
      if (size > MAX_TRACKS_BYTES) throw notMovie(`its Tracks element is larger than ${MAX_TRACKS_BYTES} bytes`);
      this.sawTracks = true;
      return this.collect(id, size);
    }
    this.next = this.pos + size;
  }

  private collect(id: number, size: number) {
    this.collecting = { id, parts: [] };
    this.next = this.pos + size;
    if (size === 0) this.finishCollected();
  }

  private finishCollected() {
    const { id, parts } = this.collecting ?? { id: 0, parts: [] };
    this.collecting = undefined;
    const body = Buffer.concat(parts);
    if (id === EBML_HEADER) {
      const docType = findChild(body, DOC_TYPE)?.toString('latin1');
      if (docType !== 'webm' && docType !== 'matroska') throw notMovie('its document type is not webm or matroska');
    } else {
      for (const entry of children(body, TRACK_ENTRY)) {
        const type = findChild(entry, TRACK_TYPE);
        const value = type?.length ? type.readUIntBE(0, Math.min(type.length, 6)) : 0;
        if (value === 1) this.handlers.add('vide');
        if (value === 2) this.handlers.add('soun');
      }
    }
  }

  /** Checks the end of the file; throws BAD_USER_INPUT when the structure is not a movie's. */
  end(): IsoMovie {
    if (this.stage !== 'inside') throw notMovie('it ends before its segment starts');
    if (this.header.length > 0 || this.pos < this.next || this.collecting)
      throw notMovie('an element runs past the end of the file');
    if (Number.isFinite(this.segmentEnd) && this.pos !== this.segmentEnd)
      throw notMovie('its segment does not end with the file');
    if (!this.sawTracks) throw notMovie('it has no Tracks element');
    return { handlers: this.handlers };
  }
}

/** The bodies of the direct children of `body` with id `id` (a malformed body is refused). */
function children(body: Buffer, id: number): Buffer[] {
  const found: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    const h = elementHeader(body, at);
    if (h.short || h.size === undefined || at + h.length + h.size > body.length)
      throw notMovie('an element inside a header is malformed');
    if (h.id === id) found.push(body.subarray(at + h.length, at + h.length + h.size));
    at += h.length + h.size;
  }
  return found;
}

const findChild = (body: Buffer, id: number): Buffer | undefined => children(body, id)[0];
