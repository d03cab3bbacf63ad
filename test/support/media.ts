import sharp from 'sharp';

/** Test media built by hand: MP4/QuickTime movies with chosen tracks, animated images. */

const box = (type: string, ...payload: Buffer[]) => {
  const body = Buffer.concat(payload);
  const header = Buffer.alloc(8);
  header.writeUInt32BE(8 + body.length, 0);
  header.write(type, 4, 'latin1');
  return Buffer.concat([header, body]);
};

/** A track whose handler (`hdlr`) says `handler` (`vide`, `soun`…). */
const track = (handler: string) =>
  box(
    'trak',
    box('tkhd', Buffer.alloc(84)),
    box(
      'mdia',
      box('mdhd', Buffer.alloc(24)),
      box('hdlr', Buffer.alloc(8), Buffer.from(handler, 'latin1'), Buffer.alloc(13)),
    ),
  );

/**
 * An MP4 (or, with brand `qt  `, a QuickTime movie) of exactly `size` bytes when given: `ftyp`,
 * then `moov` with one track per handler, then `mdat` holding filler (or `moov` after `mdat`).
 */
export function movie(
  o: { size?: number; handlers?: string[]; brand?: string; moovLast?: boolean; largeMdat?: boolean } = {},
): Buffer {
  const brand = o.brand ?? 'isom';
  const ftyp = box('ftyp', Buffer.from(`${brand}\0\0\x02\0${brand}iso2mp41`, 'latin1'));
  const moov = box('moov', box('mvhd', Buffer.alloc(100)), ...(o.handlers ?? ['vide', 'soun']).map(track));
  const mdatHeader = o.largeMdat ? 16 : 8;
  const fill = Math.max(16, (o.size ?? 0) - ftyp.length - moov.length - mdatHeader);
  // Media bytes that differ from one offset to the next (byte ranges can be told apart).
  const media = Buffer.alloc(fill);
  for (let i = 0; i < fill; i++) media[i] = i % 251;
  let mdat: Buffer;
  if (o.largeMdat) {
    const header = Buffer.alloc(16);
    header.writeUInt32BE(1, 0);
    header.write('mdat', 4, 'latin1');
    header.writeBigUInt64BE(BigInt(16 + fill), 8);
    mdat = Buffer.concat([header, media]);
  } else {
    mdat = box('mdat', media);
  }
  return Buffer.concat(o.moovLast ? [ftyp, mdat, moov] : [ftyp, moov, mdat]);
}

/** The start of an MP4 (an `ftyp` box) and then filler: what a video looked like to the old sniffing. */
export function fakeMovie(size: number): Buffer {
  const b = Buffer.alloc(size, 7);
  Buffer.from('\0\0\0\x18ftypisom\0\0\0\0isomiso2', 'latin1').copy(b);
  return b;
}

/** An animated GIF or WebP of `frames` frames of width × height, each of its own colour. */
export async function animation(format: 'gif' | 'webp', frames: number, width: number, height: number) {
  const pictures = await Promise.all(
    Array.from({ length: frames }, (_, i) =>
      sharp({
        create: { width, height, channels: 3, background: { r: (i * 37) % 256, g: 80, b: 255 - ((i * 23) % 256) } },
      })
        .png()
        .toBuffer(),
    ),
  );
  const joined = sharp(pictures, { join: { animated: true } });
  return format === 'gif' ? joined.gif().toBuffer() : joined.webp().toBuffer();
}
