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

/** An EBML element: its id bytes, an 8-byte size (or unknown), its body. */
const element = (id: number[], body: Buffer, unknownSize = false) => {
  const size = Buffer.alloc(8);
  if (unknownSize) size.fill(0xff, 1);
  else size.writeBigUInt64BE(BigInt(body.length), 0);
  size[0] = 0x01 | (size[0] ?? 0);
  return Buffer.concat([Buffer.from(id), size, body]);
};

/**
 * A WebM (or Matroska) file of at least `size` bytes: EBML header, a Segment (of unknown size by
 * default, as MediaRecorder writes it) with Tracks (one entry per track type: 1 video, 2 audio)
 * and one Cluster holding a SimpleBlock of filler.
 */
export function webm(o: { size?: number; trackTypes?: number[]; docType?: string; knownSize?: boolean } = {}): Buffer {
  const header = element([0x1a, 0x45, 0xdf, 0xa3], element([0x42, 0x82], Buffer.from(o.docType ?? 'webm', 'latin1')));
  const tracks = element(
    [0x16, 0x54, 0xae, 0x6b],
    Buffer.concat(
      (o.trackTypes ?? [1, 2]).map((type, i) =>
        element([0xae], Buffer.concat([element([0xd7], Buffer.from([i + 1])), element([0x83], Buffer.from([type]))])),
      ),
    ),
  );
  const fill = Math.max(16, (o.size ?? 0) - header.length - 12 - tracks.length - 12 - 10 - 9);
  const media = Buffer.alloc(fill);
  for (let i = 0; i < fill; i++) media[i] = i % 251;
  const cluster = element(
    [0x1f, 0x43, 0xb6, 0x75],
    Buffer.concat([element([0xe7], Buffer.from([0])), element([0xa3], media)]),
    !o.knownSize,
  );
  const body = Buffer.concat([tracks, cluster]);
  return Buffer.concat([header, element([0x18, 0x53, 0x80, 0x67], body, !o.knownSize)]);
}
