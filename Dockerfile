# One image for every service; the command picks which one runs.
FROM node:20-bookworm-slim
WORKDIR /app
RUN npm install -g pnpm@10.34.8
COPY . .
RUN pnpm install --frozen-lockfile
ENV HOST=0.0.0.0
EXPOSE 8288
CMD ["pnpm", "start:gateway"]
