#include "service/agentrpc/convert.h"

#include <cmath>

#include "schema/tf_config_wire.h"

namespace tfslurm::agentrpc {

TaskRef FromProto(const agent::v1::TaskRef& ref) {
  // proven_uid: the transport fills it in (uid_proof.h).
  return {ref.experiment_id(), ref.attempt(), ref.secret(), ProcId(ref.proc_id()), std::nullopt};
}

RegisterInfo FromProto(const agent::v1::Register& reg) {
  RegisterInfo info;
  info.slurm_job_id = reg.slurm_job_id();
  info.node_id = reg.node_id();
  info.local_id = reg.local_id();
  info.node_name = reg.node_name();
  info.address = reg.address();
  info.port = reg.port();
  info.reconnect = reg.reconnect();
  info.standby = reg.standby();
  if (reg.has_started_after_launch_ms())
    info.started_after_launch_ms = reg.started_after_launch_ms();
  return info;
}

std::vector<ScalarPoint> FromProto(const agent::v1::Scalars& scalars) {
  std::vector<ScalarPoint> points;
  points.reserve(scalars.scalars_size());
  for (const agent::v1::Scalar& s : scalars.scalars()) {
    ScalarPoint& p = points.emplace_back();
    p.tag = s.tag();
    p.step = s.step();
    p.wall_time = s.wall_time();
    if (std::isfinite(s.value())) p.value = s.value();
  }
  return points;
}

agent::v1::ServiceMessage ToProto(const ServiceMsg& message, TfConfigEncoding encoding) {
  agent::v1::ServiceMessage out;
  if (const auto* a = std::get_if<AssignmentMsg>(&message)) {
    auto* p = out.mutable_assignment();
    p->set_role(a->role);
    p->set_index(a->index);
    p->set_framework(a->framework);
    if (a->cluster) {
      if (encoding == TfConfigEncoding::kWhole || a->cluster->zlib.empty()) {
        p->set_tf_config(wire::TfConfigForTask(a->cluster->json, a->role, a->index));
      } else {
        p->set_cluster_digest(a->cluster->digest);
        if (encoding == TfConfigEncoding::kCompressedCluster) p->set_cluster_zlib(a->cluster->zlib);
      }
    }
    for (const auto& arg : a->command) p->add_command(arg);
    p->set_workdir(a->workdir);
    for (const auto& [k, v] : a->env) (*p->mutable_env())[k] = v;
    p->set_model_dir(a->model_dir);
    p->set_heartbeat_interval_ms(a->heartbeat_interval_ms);
    p->set_shutdown_grace_ms(a->shutdown_grace_ms);
    p->set_report_checkpoints(a->report_checkpoints);
    p->set_stay_for_next_attempt(a->stay_for_next_attempt);
    if (!a->container.runtime.empty()) {
      auto* c = p->mutable_container();
      c->set_runtime(a->container.runtime);
      c->set_image(a->container.image);
      for (const ContainerMount& m : a->container.mounts) {
        auto* pm = c->add_mounts();
        pm->set_source(m.source);
        pm->set_target(m.target);
        pm->set_read_only(m.read_only);
      }
      c->set_gpus(a->container.gpus);
    }
  } else if (const auto* s = std::get_if<ShutdownMsg>(&message)) {
    out.mutable_shutdown()->set_reason(s->reason);
    out.mutable_shutdown()->set_grace_ms(s->grace_ms);
  } else if (const auto* r = std::get_if<RefusedMsg>(&message)) {
    out.mutable_refused()->set_reason(r->reason);
    out.mutable_refused()->set_permanent(r->permanent);
    out.mutable_refused()->set_unknown_experiment(r->unknown_experiment);
  } else if (const auto* n = std::get_if<NextAttemptMsg>(&message)) {
    out.mutable_next_attempt()->set_attempt(n->attempt);
    out.mutable_next_attempt()->set_reason(n->reason);
    out.mutable_next_attempt()->set_log_dir(n->log_dir);
  } else if (const auto* r = std::get_if<ReleaseMsg>(&message)) {
    out.mutable_release()->set_reason(r->reason);
  } else if (const auto* s = std::get_if<SpareMsg>(&message)) {
    out.mutable_spare()->set_reason(s->reason);
  }
  return out;
}

}  // namespace tfslurm::agentrpc
