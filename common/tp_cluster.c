/* tp_cluster.c — readers of device and cluster key files. */
#include "tp_cluster.h"
#include "tp_error.h"
#include "tp_keyfile.h"
#include "tp_model.h"

#include <string.h>

/* Largest FLOP/s, bytes, bytes/s a device or cluster file may give. */
#define TP_DEVICE_MAX 1e30

void tp_device_clear(TpDevice *d)
{
  g_free(d->id);
  g_free(d->name);
}

void tp_cluster_free(TpCluster *c)
{
  if (!c)
    return;
  for (int i = 0; i < c->n && c->dev; i++)
    tp_device_clear(&c->dev[i]);
  g_free(c->dev);
  g_free(c->name);
  g_free(c->source);
  g_free(c);
}

void tp_cluster_expand(TpCluster *c, int n)
{
  if (!c->any_count || n <= c->n)
    return;
  c->dev = g_renew(TpDevice, c->dev, n);
  for (int i = c->n; i < n; i++) {
    c->dev[i] = c->dev[0];
    c->dev[i].id = g_strdup(c->dev[0].id);
    c->dev[i].name = g_strdup(c->dev[0].name);
  }
  c->n = n;
}

static gboolean device_read(TpKeyFile *k, TpDevice *d, GError **err)
{
  static const char *const keys[] = { "name", "flops", "flops_16bit", "memory", "memory_bandwidth", "efficiency", NULL };
  if (!g_key_file_has_group(k->kf, "device"))
    return tp_kf_fail(k, err, "device", NULL, "missing group");
  d->efficiency = 1.0;
  g_auto(GStrv) groups = g_key_file_get_groups(k->kf, NULL);
  for (int i = 0; groups[i]; i++)
    if (strcmp(groups[i], "device") != 0)
      return tp_kf_fail(k, err, groups[i], NULL, "unknown group (a device file has [device] only)");
  /* bounds keep every time derived from them finite and above zero */
  if (!tp_kf_known_keys(k, "device", keys, err) ||
      !tp_kf_number(k, "device", "flops", TRUE, 1, TP_DEVICE_MAX, &d->flops, err) ||
      !tp_kf_number(k, "device", "flops_16bit", FALSE, 1, TP_DEVICE_MAX, &d->flops16, err) ||
      !tp_kf_number(k, "device", "memory", TRUE, 1, TP_DEVICE_MAX, &d->memory, err) ||
      !tp_kf_number(k, "device", "memory_bandwidth", TRUE, 1, TP_DEVICE_MAX, &d->bandwidth, err) ||
      !tp_kf_number(k, "device", "efficiency", FALSE, 1e-6, 1, &d->efficiency, err))
    return FALSE;
  g_autofree char *base = g_path_get_basename(k->name);
  char *dot = strrchr(base, '.');
  if (dot)
    *dot = '\0';
  d->id = g_strdup(base);
  if (!tp_kf_name(k, "device", "name", FALSE, FALSE, &d->name, err))
    return FALSE;
  if (!d->name)
    d->name = tp_name_from_file(k->name);
  return TRUE;
}

TpDevice *tp_device_load(const char *path, GError **err)
{
  TpKeyFile k;
  if (!tp_kf_open_file(&k, path, "device file", err))
    return NULL;
  TpDevice *d = g_new0(TpDevice, 1);
  gboolean ok = device_read(&k, d, err);
  tp_kf_close(&k);
  if (!ok) {
    tp_device_clear(d);
    g_free(d);
    return NULL;
  }
  return d;
}

static char *device_path(const char *cluster_path, const char *id)
{
  g_autofree char *dir = g_path_get_dirname(cluster_path);
  g_autofree char *file = g_strconcat(id, ".device", NULL);
  char *p = g_build_filename(dir, "..", "devices", file, NULL);
  if (g_file_test(p, G_FILE_TEST_IS_REGULAR))
    return p;
  g_free(p);
  return tp_data_find("TP_DEVICES_DIR", "models/devices", id, ".device");
}

char *tp_cluster_path(const char *name_or_path)
{
  if (strchr(name_or_path, '/') || g_str_has_suffix(name_or_path, ".cluster"))
    return g_strdup(name_or_path);
  return tp_data_find("TP_CLUSTERS_DIR", "models/clusters", name_or_path, ".cluster");
}

TpCluster *tp_cluster_load(const char *name_or_path, GError **err)
{
  g_autofree char *path = tp_cluster_path(name_or_path);
  if (!path) {
    g_autofree char *q = tp_quote(name_or_path);
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_CLUSTER, "no cluster named %s (shipped: " TP_CLUSTERS_SHIPPED ")", q);
    return NULL;
  }
  TpKeyFile k;
  if (!tp_kf_open_file(&k, path, "cluster file", err))
    return NULL;
  static const char *const keys[] = { "name", "devices", "link_bandwidth", "link_latency", "link_eager_limit",
                                      "gpus_per_node", "network_bandwidth", "network_latency", NULL };
  double gpn = 1;
  g_autoptr(TpCluster) c = g_new0(TpCluster, 1);
  c->source = g_strdup(path);
  gboolean ok = g_key_file_has_group(k.kf, "cluster") || tp_kf_fail(&k, err, "cluster", NULL, "missing group");
  g_auto(GStrv) groups = g_key_file_get_groups(k.kf, NULL);
  for (int i = 0; ok && groups[i]; i++)
    if (strcmp(groups[i], "cluster") != 0)
      ok = tp_kf_fail(&k, err, groups[i], NULL, "unknown group (a cluster file has [cluster] only)");
  ok = ok && tp_kf_known_keys(&k, "cluster", keys, err) &&
       tp_kf_number(&k, "cluster", "link_bandwidth", TRUE, 1e-6, TP_DEVICE_MAX, &c->link_bandwidth, err) &&
       tp_kf_number(&k, "cluster", "link_latency", FALSE, 0, 1e9, &c->link_latency, err) &&
       tp_kf_number(&k, "cluster", "link_eager_limit", FALSE, 0, TP_DEVICE_MAX, &c->link_eager_limit, err) &&
       tp_kf_number(&k, "cluster", "gpus_per_node", FALSE, 1, 4096, &gpn, err) &&
       tp_kf_number(&k, "cluster", "network_bandwidth", FALSE, 1e-6, TP_DEVICE_MAX, &c->network_bandwidth, err) &&
       tp_kf_number(&k, "cluster", "network_latency", FALSE, 0, 1e9, &c->network_latency, err);
  c->gpus_per_node = (int)gpn;
  if (ok && gpn != c->gpus_per_node)
    ok = tp_kf_fail(&k, err, "cluster", "gpus_per_node", "expected a whole number of GPUs, got %g", gpn);
  if (ok && !g_key_file_has_key(k.kf, "cluster", "network_bandwidth", NULL))
    c->network_bandwidth = c->link_bandwidth;
  if (ok && !g_key_file_has_key(k.kf, "cluster", "network_latency", NULL))
    c->network_latency = c->link_latency;
  g_autofree char *devs = ok ? g_key_file_get_value(k.kf, "cluster", "devices", NULL) : NULL;
  if (ok && !devs)
    ok = tp_kf_fail(&k, err, "cluster", NULL, "missing key 'devices' (device names, one per worker)");
  if (ok) {
    g_auto(GStrv) ids = g_strsplit(devs, ",", -1);
    c->n = (int)g_strv_length(ids);
    if (c->n == 0)
      ok = tp_kf_fail(&k, err, "cluster", "devices", "no devices (name one per worker)");
    c->dev = g_new0(TpDevice, c->n);
    for (int i = 0; ok && i < c->n; i++) {
      char *id = g_strstrip(ids[i]);
      g_autofree char *dp = *id ? device_path(path, id) : NULL;
      if (!dp) {
        g_autofree char *q = tp_quote(id);
        ok = tp_kf_fail(&k, err, "cluster", "devices", "no device file for %s (looked for NAME.device in the "
                                                       "cluster's ../devices and in the data directories)", q);
        break;
      }
      TpDevice *d = tp_device_load(dp, err);
      if (!(ok = d != NULL))
        break;
      c->dev[i] = *d;
      g_free(d);
    }
  }
  c->any_count = ok && c->n == 1 && g_key_file_has_key(k.kf, "cluster", "gpus_per_node", NULL);
  ok = ok && tp_kf_name(&k, "cluster", "name", FALSE, FALSE, &c->name, err);
  if (ok && !c->name)
    c->name = tp_name_from_file(path);
  tp_kf_close(&k);
  return ok ? g_steal_pointer(&c) : NULL;
}
