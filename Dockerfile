# syntax=docker/dockerfile:1
# Parley gateway image. Multi-stage: dependencies and a type-check gate in build stages, a slim
# runtime with production dependencies only, running as the unprivileged `node` user.
# The server runs its TypeScript through tsx (a production dependency), exactly as CI runs it
# (`node --import tsx src/main.ts`, see test/multi-instance.test.ts).
ARG NODE_VERSION=20

FROM node:${NODE_VERSION}-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund

# Build gate: the image is only produced from code that type-checks.
FROM deps AS check
COPY tsconfig.json ./
COPY src ./src
RUN npx tsc --noEmit -p tsconfig.json && touch /app/.typechecked

FROM node:${NODE_VERSION}-bookworm-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000
WORKDIR /app
COPY --from=check /app/.typechecked ./
COPY --from=prod-deps --chown=node:node /app/node_modules ./node_modules
COPY --chown=node:node package.json ./
COPY --chown=node:node drizzle ./drizzle
COPY --chown=node:node src ./src
USER node
EXPOSE 3000
# Liveness: GET /healthz answers while the process serves HTTP (readiness is GET /readyz).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM: stop accepting, finish in-flight requests, close sockets (1001) and stores.
STOPSIGNAL SIGTERM
CMD ["node", "--import", "tsx", "src/main.ts"]
