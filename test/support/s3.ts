import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './private-services.js';

/**
 * A real S3-protocol server of the test's own: s3rver (npm, a devDependency) as a separate
 * process on a free port, over HTTP, with its own data directory and one bucket. Never an
 * in-process mock: the gateway's S3 driver talks to it exactly as it would to AWS S3 or MinIO.
 * s3rver checks AWS signatures with the fixed credentials S3RVER / S3RVER.
 */
export interface S3Server {
  endpoint: string;
  bucket: string;
  /** The gateway's environment to use this server (STORAGE_DRIVER=s3 and the S3_* variables). */
  env(keyPrefix?: string): Record<string, string>;
  stop(): Promise<void>;
}

export async function startS3Server(bucket = 'parley-test'): Promise<S3Server> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'parley-s3rver-'));
  const bin = createRequire(import.meta.url).resolve('s3rver/bin/s3rver.js');
  const child: ChildProcess = spawn(
    process.execPath,
    [
      bin,
      '-d',
      dir,
      '-a',
      '127.0.0.1',
      '-p',
      String(port),
      '--silent',
      '--no-vhost-buckets',
      '--configure-bucket',
      bucket,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (d) => {
    output += d;
  });
  child.stderr?.on('data', (d) => {
    output += d;
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`s3rver exited (${child.exitCode}): ${output}`);
    // An anonymous request answers (403) once the server listens.
    const up = await fetch(`${endpoint}/${bucket}`).then(
      () => true,
      () => false,
    );
    if (up) break;
    if (Date.now() > deadline) throw new Error(`s3rver did not come up within 20 s: ${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    endpoint,
    bucket,
    env: (keyPrefix = '') => ({
      STORAGE_DRIVER: 's3',
      S3_ENDPOINT: endpoint,
      S3_REGION: 'us-east-1',
      S3_BUCKET: bucket,
      S3_ACCESS_KEY_ID: 'S3RVER',
      S3_SECRET_ACCESS_KEY: 'S3RVER',
      S3_FORCE_PATH_STYLE: 'on',
      S3_KEY_PREFIX: keyPrefix,
    }),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
