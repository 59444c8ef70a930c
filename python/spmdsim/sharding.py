"""The rest of JAX's surface on spmdsim's PartitionSpec and NamedSharding: PartitionSpec.partitions and
NamedSharding's addressable devices of the current process."""

from spmdsim._spmdsim import NamedSharding, PartitionSpec
from spmdsim.machine import process_index


PartitionSpec.partitions = property(lambda self: self._partitions, doc="JAX: the entries as a tuple.")


def _addressable_devices(self):
    p = process_index()
    return {d for d in self.device_set if d.process_index == p}


NamedSharding.addressable_devices = property(_addressable_devices,
                                             doc="JAX: the devices of the current process (spmdsim.process_index()).")
NamedSharding.is_fully_addressable = property(lambda self: len(self.addressable_devices) == len(self.device_set))
NamedSharding.memory_kind = property(lambda self: "device")
_named_sharding_addressable_map = NamedSharding.addressable_devices_indices_map


def _addressable_devices_indices_map(self, global_shape, *, process_index=None):
    """JAX: addressable_devices_indices_map(global_shape): the map restricted to the devices of the current
    process (spmdsim.process_index(), or `process_index=`)."""
    p = globals()["process_index"]() if process_index is None else process_index
    return _named_sharding_addressable_map(self, global_shape, process_index=p)


NamedSharding.addressable_devices_indices_map = _addressable_devices_indices_map


def _is_spec(x):
    return isinstance(x, PartitionSpec) or (type(x).__name__ in ("P", "PartitionSpec")
                                            and type(x).__module__.split(".")[0] == "jax")
