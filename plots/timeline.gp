# timeline.gp — one lane per stage: forward, backward, update and transfer boxes on a time axis;
# with two series the simulated timeline sits in the upper half of each lane, the measured below.
# Variables: data (y x0 x1 kind series halfh "label"; kind 0 F, 1 B, 2 U, 3/4 activations/gradients sent), lanes, ytics_cmd, title, xlabel, series (1 or 2),
#            labels (0/1; 1 only when some forward or backward is drawn), xmax, has_update, has_xfer
#            (0/1: whether the legend names them).
load common
set title title
set xlabel xlabel
set yrange [0.45:lanes + 0.55]
set xrange [0:xmax]
eval ytics_cmd
set grid xtics lc rgb "#e5e5e5" lw 1
set style fill solid 1.0 border lc rgb "#ffffff"
box(k, s) = ($4 == k && $5 == s) ? $1 : 1/0
cx = "(($2+$3)/2)"
hw = "(($3-$2)/2)"
# the labels of forwards and backwards, only when asked for (gnuplot 5.4 crashes on a label plot
# whose points are all undefined after another plot)
lab1 = labels ? ', data using (($2+$3)/2):($4 < 2 ? $1 : 1/0):7 with labels font ",8" tc rgb "#ffffff" notitle' : ""
lab2 = labels ? ', data using (($2+$3)/2):($4 < 2 ? $1 : 1/0):7 with labels font ",7" tc rgb "#222222" notitle' : ""
if (series == 1) {
  plot data using @cx:(box(0,0)):@hw:6 with boxxyerror fc rgb "#4C78A8" title "forward", \
       data using @cx:(box(1,0)):@hw:6 with boxxyerror fc rgb "#F58518" title "backward", \
       data using @cx:(box(2,0)):@hw:6 with boxxyerror fc rgb "#54A24B" title (has_update ? "update" : ""), \
       data using @cx:(box(3,0)):@hw:6 with boxxyerror fc rgb "#A0A0A0" title (has_xfer ? "activations sent" : ""), \
       data using @cx:(box(4,0)):@hw:6 with boxxyerror fc rgb "#505050" title (has_xfer ? "gradients sent" : "") \
       @lab1
} else {
  plot data using @cx:(box(0,0)):@hw:6 with boxxyerror fc rgb "#4C78A8" title "forward (simulated)", \
       data using @cx:(box(1,0)):@hw:6 with boxxyerror fc rgb "#F58518" title "backward (simulated)", \
       data using @cx:(box(2,0)):@hw:6 with boxxyerror fc rgb "#54A24B" title "update (simulated)", \
       data using @cx:(box(0,1)):@hw:6 with boxxyerror fc rgb "#9ECAE9" title "forward (measured)", \
       data using @cx:(box(1,1)):@hw:6 with boxxyerror fc rgb "#FFBF79" title "backward (measured)", \
       data using @cx:(box(2,1)):@hw:6 with boxxyerror fc rgb "#88D27A" title "update (measured)" \
       @lab2
}
