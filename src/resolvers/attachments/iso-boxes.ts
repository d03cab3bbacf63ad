import { badInput } from '../../errors.js';

/**
 * "A video must be a video": the MP4 / QuickTime (ISO base media) structure of an upload that
 * starts with an `ftyp` box, checked while its bytes pass. Four bytes `ftyp` at offset 4 are not
 * enough (anyone can write them before 100 MiB of filler and get the video limit): the top-level
 * boxes must chain from the first byte exactly to the last, the first must be a well-formed
 * `ftyp`, and the movie box (`moov`) must be there and declare a track of the kind's media
 * (`vide` for a video, `soun` or `vide` for voice). Only box headers and the `moov` box (at most
 * MAX_MOOV_BYTES, kept in memory) are read; the media data is only counted.
 */

/** The largest movie box read (a two-hour film's is a few MiB; anything larger is refused). */
export const MAX_MOOV_BYTES = 8 * 1024 * 1024;
const MAX_FTYP_BYTES = 4096;

/** What a finished walk found: the handler types of the movie's tracks (`vide`, `soun`, …). */
export interface IsoMovie {
  handlers: Set<string>;
}

const notMovie = (why: string) => badInput(`The file is not a valid MP4/QuickTime movie: ${why}`);

/** Four printable ASCII characters (box types such as `moov`, `©nam`'s relatives excepted at top level). */
const isBoxType = (b: Buffer, at: number) => {
  for (let i = at; i < at + 4; i++) {
    const c = b[i] ?? 0;
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
};

export class IsoBoxWalker {
  /** Bytes seen so far. */
  private pos = 0;
  /** Offset of the next top-level box header. */
  private next = 0;
  /** A header being read across chunks. */
  private header = Buffer.alloc(0);
  /** The box currently passing (type), and the movie box's bytes while it passes. */
  private current = '';
  private moov: Buffer[] | undefined;
  private moovBytes = 0;
  /** A last box of size 0 runs to the end of the file. */
  private toEnd = false;
  private boxes = 0;
  private readonly handlers = new Set<string>();
  private sawMoov = false;

  push(chunk: Buffer) {
    let i = 0;
    while (i < chunk.length && !this.toEnd) {
      if (this.pos < this.next) {
        const n = Math.min(chunk.length - i, this.next - this.pos);
        if (this.moov) this.keepMoov(chunk.subarray(i, i + n));
        this.pos += n;
        i += n;
        if (this.pos === this.next && this.moov) this.finishMoov();
        continue;
      }
      // A header: 8 bytes, or 16 when the 32-bit size is 1 (a 64-bit size follows).
      const want = this.header.length >= 8 && this.header.readUInt32BE(0) === 1 ? 16 : 8;
      const n = Math.min(chunk.length - i, want - this.header.length);
      this.header = Buffer.concat([this.header, chunk.subarray(i, i + n)]);
      this.pos += n;
      i += n;
      if (this.header.length === 8 && this.header.readUInt32BE(0) === 1) continue;
      if (this.header.length === want) this.openBox();
    }
    if (this.toEnd) this.pos += chunk.length - i;
  }

  private openBox() {
    const h = this.header;
    const size32 = h.readUInt32BE(0);
    const type = h.toString('latin1', 4, 8);
    const headerBytes = h.length;
    this.header = Buffer.alloc(0);
    if (!isBoxType(h, 4)) throw notMovie('a box has no valid type');
    if (this.boxes === 0 && type !== 'ftyp') throw notMovie('it does not start with an ftyp box');
    this.boxes++;
    const start = this.pos - headerBytes;
    let size: number;
    if (size32 === 0) {
      this.toEnd = true;
      size = Number.POSITIVE_INFINITY;
    } else if (size32 === 1) {
      size = Number(h.readBigUInt64BE(8));
      if (size < 16) throw notMovie(`box ${type} is shorter than its header`);
    } else {
      size = size32;
      if (size < 8) throw notMovie(`box ${type} is shorter than its header`);
    }
    if (type === 'ftyp' && (this.boxes !== 1 || size < 16 || size > MAX_FTYP_BYTES || (size - 8) % 4 !== 0)) {
      throw notMovie('its ftyp box is malformed');
    }
    this.current = type;
    if (type === 'moov') {
      if (this.sawMoov) throw notMovie('it has two movie boxes');
      if (this.toEnd || size - headerBytes > MAX_MOOV_BYTES)
        throw notMovie(`its movie box is larger than ${MAX_MOOV_BYTES} bytes`);
      this.sawMoov = true;
      this.moov = [];
      this.moovBytes = 0;
    }
    this.next = start + size;
    if (!this.toEnd && this.pos === this.next && this.moov) this.finishMoov();
  }

  private keepMoov(part: Buffer) {
    this.moov?.push(Buffer.from(part));
    this.moovBytes += part.length;
  }

  private finishMoov() {
    const body = Buffer.concat(this.moov ?? []);
    this.moov = undefined;
    collectHandlers(body, 0, body.length, this.handlers, 0);
  }

  /** Checks the end of the file; throws BAD_USER_INPUT when the structure is not a movie's. */
  end(): IsoMovie {
    if (this.header.length > 0 || (!this.toEnd && this.pos !== this.next)) {
      throw notMovie(`its box ${this.current || '(none)'} runs past the end of the file`);
    }
    if (!this.sawMoov) throw notMovie('it has no movie box (moov)');
    if (this.moov) throw notMovie('its movie box is cut short');
    return { handlers: this.handlers };
  }
}

/** Boxes under `moov` that hold tracks' handlers: moov > trak > mdia > hdlr. */
const CONTAINERS = new Set(['trak', 'mdia']);

/** Reads the `hdlr` boxes of the tracks inside a movie box's body (a malformed body is refused). */
function collectHandlers(b: Buffer, from: number, to: number, handlers: Set<string>, depth: number) {
  let at = from;
  while (at + 8 <= to) {
    let size = b.readUInt32BE(at);
    const type = b.toString('latin1', at + 4, at + 8);
    let header = 8;
    if (size === 1) {
      if (at + 16 > to) throw notMovie('a box inside the movie box is cut short');
      size = Number(b.readBigUInt64BE(at + 8));
      header = 16;
    } else if (size === 0) {
      size = to - at;
    }
    if (size < header || at + size > to) throw notMovie(`box ${type} inside the movie box is malformed`);
    if (type === 'hdlr' && size >= header + 12) handlers.add(b.toString('latin1', at + header + 8, at + header + 12));
    if (CONTAINERS.has(type) && depth < 4) collectHandlers(b, at + header, at + size, handlers, depth + 1);
    at += size;
  }
}
