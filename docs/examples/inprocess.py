"""OnlyLabelled in-process: registered next to the in-tree plugins, no plugin host, no server."""

import asyncio

from framework.profiles import build_registry, load_scheduler_config
from framework.scheduler import Scheduler
from mypkg.plugins import OnlyLabelled
from pluginhost.manifest import parse_objects


async def main() -> None:
    registry = build_registry()
    registry.register_class(OnlyLabelled)
    config = load_scheduler_config("scheduler-remote.yaml", registry)  # the profile names OnlyLabelled
    scheduler = Scheduler(config, registry)
    running = asyncio.create_task(scheduler.run())
    for path in ("cluster.yaml", "pod.yaml"):
        with open(path) as f:
            await scheduler.apply(parse_objects(f.read(), path))
    async for event in scheduler.events():
        if event.kind == "Pod" and event.name == "web" and event.type in ("Bound", "Unschedulable"):
            print(f"{event.namespace}/{event.name}: {event.type} {event.node_name}")
            break
    await scheduler.stop()
    await running


asyncio.run(main())
