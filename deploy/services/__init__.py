"""Real services on loopback for tests and the demo: Redis, ZooKeeper, Kafka (Tansu), MongoDB (SecantusDB)."""

from deploy.services.base import LocalService, ServiceError, ServiceRecord
from deploy.services.local import SERVICE_NAMES, Options, down, recorded, restart, status, up

__all__ = ["SERVICE_NAMES", "LocalService", "Options", "ServiceError", "ServiceRecord", "down", "recorded", "restart",
           "status", "up"]
