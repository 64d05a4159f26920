/* tp_checkpoint_priv.h — what the checkpoint's writer (tp_checkpoint.c) and its directory's
 * bookkeeping (tp_checkpoint_dir.c) share, and nobody else. */
#ifndef TP_CHECKPOINT_PRIV_H
#define TP_CHECKPOINT_PRIV_H

/* Remove from dir the state files and temporaries of other checkpoints than generation keep:
 * stage < 0: every one but the whole-run file of keep (and the metadata's temporaries); stage 0:
 * the whole-run files and the metadata's temporaries; stage S: stage S's files but keep's. */
void tp_checkpoint_remove_files(const char *dir, int keep, int stage);

#endif
