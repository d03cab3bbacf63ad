import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

/**
 * `@parley/client` as the tarball `npm install` takes (the `npm pack` layout: every file under
 * `package/`), built once from client/ beside src/ and dist/ alike, so any team installs the
 * client of the gateway it talks to: `npm install https://<parley>/client/parley-client.tgz`.
 */
export const CLIENT_PACKAGE_PATH = '/client/parley-client.tgz';

export function clientPackageTarball(clientDir: string): Buffer {
  const manifest = JSON.parse(readFileSync(join(clientDir, 'package.json'), 'utf8')) as { files: string[] };
  const entries = ['package.json', ...manifest.files].map((name) => ({
    name: `package/${name}`,
    body: readFileSync(join(clientDir, name)),
  }));
  const blocks = entries.flatMap(({ name, body }) => [tarHeader(name, body.length), padded(body)]);
  // Two empty blocks end a tar archive.
  return gzipSync(Buffer.concat([...blocks, Buffer.alloc(1024)]));
}

const BLOCK = 512;
const padded = (body: Buffer) => Buffer.concat([body, Buffer.alloc((BLOCK - (body.length % BLOCK)) % BLOCK)]);

/** A POSIX ustar header of a regular file (mode 644, fixed owner and time: the same bytes every build). */
function tarHeader(name: string, size: number): Buffer {
  const header = Buffer.alloc(BLOCK);
  const put = (value: string, offset: number, length: number) => header.write(value, offset, length, 'utf8');
  const octal = (value: number, length: number) => `${value.toString(8).padStart(length - 1, '0')}\0`;
  put(name, 0, 100);
  put(octal(0o644, 8), 100, 8);
  put(octal(0, 8), 108, 8);
  put(octal(0, 8), 116, 8);
  put(octal(size, 12), 124, 12);
  put(octal(0, 12), 136, 12);
  put(' '.repeat(8), 148, 8); // the checksum counts its own field as spaces
  put('0', 156, 1);
  put('ustar\0', 257, 6);
  put('00', 263, 2);
  let sum = 0;
  for (const byte of header) sum += byte;
  put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
  return header;
}
