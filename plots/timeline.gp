# timeline.gp — one lane per stage: forward, backward, update and transfer boxes on a time axis;
# with two series the simulated timeline sits in the upper half of each lane, the measured below.
# Variables: data (y x0 x1 kind series halfh "label"; kind 0 F, 1 B, 2 U, 3/4 activations/gradients sent,
#            5/6 a split backward's input/weight gradient), lanes, ytics_cmd, title, xlabel, series (1 or 2),
#            labels (0/1; 1 only when some forward or backward is drawn), xmax, has_update, has_xfer
#            (0/1: whether the legend names them), has_split (0/1: whether I and W boxes are drawn).
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
lab1 = labels ? ', data using (($2+$3)/2):($4 < 2 || $4 > 4 ? $1 : 1/0):7 with labels font ",8" tc rgb "#ffffff" notitle' : ""
lab2 = labels ? ', data using (($2+$3)/2):($4 < 2 || $4 > 4 ? $1 : 1/0):7 with labels font ",7" tc rgb "#222222" notitle' : ""
# a split backward's I and W, only when there are some (the legend of other schedules is unchanged)
spl1 = has_split ? ', data using (($2+$3)/2):(box(5,0)):(($3-$2)/2):6 with boxxyerror fc rgb "#E45756" title "input gradient", data using (($2+$3)/2):(box(6,0)):(($3-$2)/2):6 with boxxyerror fc rgb "#B279A2" title "weight gradient"' : ""
spl2 = has_split ? ', data using (($2+$3)/2):(box(5,0)):(($3-$2)/2):6 with boxxyerror fc rgb "#E45756" title "input gradient (simulated)", data using (($2+$3)/2):(box(6,0)):(($3-$2)/2):6 with boxxyerror fc rgb "#B279A2" title "weight gradient (simulated)", data using (($2+$3)/2):(box(5,1)):(($3-$2)/2):6 with boxxyerror fc rgb "#FF9D98" title "input gradient (measured)", data using (($2+$3)/2):(box(6,1)):(($3-$2)/2):6 with boxxyerror fc rgb "#D6A5C9" title "weight gradient (measured)"' : ""
if (series == 1) {
  plot data using @cx:(box(0,0)):@hw:6 with boxxyerror fc rgb "#4C78A8" title "forward", \
       data using @cx:(box(1,0)):@hw:6 with boxxyerror fc rgb "#F58518" title "backward", \
       data using @cx:(box(2,0)):@hw:6 with boxxyerror fc rgb "#54A24B" title (has_update ? "update" : ""), \
       data using @cx:(box(3,0)):@hw:6 with boxxyerror fc rgb "#A0A0A0" title (has_xfer ? "activations sent" : ""), \
       data using @cx:(box(4,0)):@hw:6 with boxxyerror fc rgb "#505050" title (has_xfer ? "gradients sent" : "") \
       @spl1 @lab1
} else {
  plot data using @cx:(box(0,0)):@hw:6 with boxxyerror fc rgb "#4C78A8" title "forward (simulated)", \
       data using @cx:(box(1,0)):@hw:6 with boxxyerror fc rgb "#F58518" title "backward (simulated)", \
       data using @cx:(box(2,0)):@hw:6 with boxxyerror fc rgb "#54A24B" title "update (simulated)", \
       data using @cx:(box(0,1)):@hw:6 with boxxyerror fc rgb "#9ECAE9" title "forward (measured)", \
       data using @cx:(box(1,1)):@hw:6 with boxxyerror fc rgb "#FFBF79" title "backward (measured)", \
       data using @cx:(box(2,1)):@hw:6 with boxxyerror fc rgb "#88D27A" title "update (measured)" \
       @spl2 @lab2
}
